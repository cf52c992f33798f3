#!/usr/bin/env bash
# cover.sh PROFILE: the coverage of the delivery hot path (dispatch,
# dispatch/storage, event and outbox, under internal/), read from PROFILE, the profile that
# make test's one run of the tests wrote (-coverpkg of those four packages,
# measured by the tests of every package that drives them: storage's
# conformance suite runs both implementations, tasks runs the lifecycle
# through real workers). Prints each package's average and every function
# no test reaches, by name.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:?usage: scripts/cover.sh PROFILE (make test and make cover write bin/hotpath.cover)}
[ -s "$profile" ] || { echo "cover.sh: no coverage profile at $profile (make test or make cover writes it)" >&2; exit 1; }
report=$(go tool cover -func="$profile")
echo "coverage of the hot path (the in-process tests of every package, as make test ran them):"
for p in engine/dispatch engine/dispatch/storage intake/event intake/outbox; do
  awk -v p="/homing/internal/$p/" 'index($1, p) && substr($1, index($1, p) + length(p)) !~ /\// { gsub("%", "", $3); n++; s += $3 } END { if (n) printf "  %-16s %5.1f%% average over %d functions\n", substr(p, 18, length(p) - 18), s / n, n }' <<<"$report"
done
echo "$report" | tail -1 | sed 's/^total:[[:space:]]*(statements)[[:space:]]*/  all four: /; s/$/ of statements/'
zero=$(grep -E '[[:space:]]0\.0%$' <<<"$report" | sed 's#^github.com/homingdev/homing/##' || true)
if [ -n "$zero" ]; then
  echo "functions no test reaches:"
  sed 's/^/  /' <<<"$zero"
else
  echo "no function of dispatch, dispatch/storage, event or outbox is at 0%"
fi
