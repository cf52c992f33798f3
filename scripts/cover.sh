#!/usr/bin/env bash
# cover.sh: the coverage of the delivery hot path, printed for CI's log.
# dispatch and its storage implementations are measured by the tests of
# every package that drives them (storage's conformance suite runs both
# implementations; tasks runs the lifecycle through real workers), then each
# function of dispatch, dispatch/storage, event and outbox that no test
# reaches is listed by name.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=$(mktemp)
log=$(mktemp)
trap 'rm -f "$profile" "$log"' EXIT
pkgs=./dispatch,./dispatch/storage,./event,./outbox
# The tests' output is shown only when one fails, so that a failure says which.
if ! go test -count=1 -short -coverpkg="$pkgs" -coverprofile="$profile" ./dispatch ./dispatch/storage ./event ./outbox ./tasks ./metrics >"$log" 2>&1; then
  grep -v '^ok ' "$log" >&2
  echo "cover.sh: a test failed while measuring coverage (above)" >&2
  exit 1
fi
report=$(go tool cover -func="$profile")
echo "coverage of the hot path (go test -short; the tests of dispatch, dispatch/storage, event, outbox, tasks and metrics):"
for p in dispatch dispatch/storage event outbox; do
  awk -v p="/homing/$p/" 'index($1, p) && substr($1, index($1, p) + length(p)) !~ /\// { gsub("%", "", $3); n++; s += $3 } END { if (n) printf "  %-16s %5.1f%% average over %d functions\n", substr(p, 9, length(p) - 9), s / n, n }' <<<"$report"
done
echo "$report" | tail -1 | sed 's/^total:[[:space:]]*(statements)[[:space:]]*/  all four: /; s/$/ of statements/'
zero=$(grep -E '[[:space:]]0\.0%$' <<<"$report" | sed 's#^github.com/homingdev/homing/##' || true)
if [ -n "$zero" ]; then
  echo "functions no test reaches:"
  sed 's/^/  /' <<<"$zero"
else
  echo "no function of dispatch, dispatch/storage, event or outbox is at 0%"
fi
