package sweeper

import (
	"context"
	"fmt"
	"time"

	"github.com/homingdev/homing/models"
)

// FirstProbeGap is the wait after the first probe of a webhook that has just
// turned failing: a receiver that is back within seconds is found back
// within seconds.
const FirstProbeGap = time.Second

// ProbeGrowth is how fast the gap between probes grows with the outage: by
// a tenth of the time the webhook has been failing.
const ProbeGrowth = 10

// ProbeGap is how long a failing webhook waits after a probe chosen at
// probeAt before the next one: FirstProbeGap plus a tenth (ProbeGrowth) of
// how long it had been failing then (since failingSince, its first failure
// since the last success), at most max (health.probe_interval). Each gap is
// therefore a tenth longer than the one before: 1, 1.1, 1.21 … s, 7 s after
// a minute, then max (10 s by default) from about a minute and a half on.
// A receiver back within the first minute waits half a gap on average, a
// second or three; a dead endpoint gets about 20 probes in its first minute
// and one every max after that (at most 10 a minute: probe_interval is at
// least 6 s).
//
// Doubling (1, 2, 4, 8 s) reached the 10 s cap within 15 s, so a receiver
// back in the first minute waited about 5 s (measured 7.3 s median,
// docs/performance.md); the target is 3 s.
//
// The backoff is counted by time failing, not by failures: failures counts
// every failed attempt, the burst of retries in flight when the webhook
// turned failing and the first attempts of new events included (those are
// never held back), so a busy webhook would reach the cap at its first probe.
// failing_since moves only with the outage. A clock that puts failingSince
// after probeAt (two hosts) counts as no time failing.
func ProbeGap(failingSince, probeAt time.Time, max time.Duration) time.Duration {
	failing := probeAt.Sub(failingSince).Round(time.Millisecond)
	if failing < 0 {
		failing = 0
	}
	// In whole milliseconds, as the SQL takes it: the failing time rounded,
	// its tenth truncated.
	return min(max, (failing/ProbeGrowth).Truncate(time.Millisecond)+FirstProbeGap)
}

// ProbeDue reports whether a step at now may choose a probe of a failing
// webhook whose health is h: it has had none yet, or the gap after its last
// one has passed. probeDuePostgres and probeDueSQLite are the same rule in
// SQL; TestProbeRuleInSQLMatchesGo holds them to this.
func ProbeDue(h models.WebhookHealth, now time.Time, max time.Duration) bool {
	next, ok := nextProbe(h, max)
	return !ok || !now.Before(next)
}

// nextProbe is when a failing webhook whose health is h may next be probed;
// false when it has had no probe (it may be probed at once).
func nextProbe(h models.WebhookHealth, max time.Duration) (time.Time, bool) {
	if h.ProbeAt == nil {
		return time.Time{}, false
	}
	since := *h.ProbeAt
	if h.FailingSince != nil {
		since = *h.FailingSince
	}
	return h.ProbeAt.Add(ProbeGap(since, *h.ProbeAt, max)), true
}

// probeDuePostgres is ProbeDue for the webhook_health row h, with
// @probe_max_before = now - max and @probe_min_before = now -
// FirstProbeGap: probe_at + min(max, failing/10 + first) <= now is probe_at +
// max <= now, or probe_at + failing/10 + first <= now (with the failing time
// taken as at least zero, so at least probe_at + first <= now). The failing
// time is rounded to the millisecond and its tenth truncated to one, as
// ProbeGap takes them (SQLite's timestamps hold no finer).
const probeDuePostgres = `(h.probe_at IS NULL OR h.probe_at <= @probe_max_before
		OR (h.probe_at <= @probe_min_before
			AND h.probe_at + (ROUND(EXTRACT(EPOCH FROM h.probe_at - COALESCE(h.failing_since, h.probe_at)) * 1000)::bigint / 10)
				* interval '1 millisecond' <= @probe_min_before))`

// probeDueSQLite is probeDuePostgres for SQLite, which has no interval
// arithmetic: each term is taken in julian days (SQLite keeps them to the
// millisecond) and rounded to whole milliseconds, so that the double's last
// bits cannot move a probe due at the exact millisecond; the tenth is an
// integer division, truncated as in ProbeGap.
const probeDueSQLite = `(h.probe_at IS NULL OR h.probe_at <= @probe_max_before
		OR (h.probe_at <= @probe_min_before
			AND ROUND((julianday(h.probe_at) - julianday(@probe_min_before)) * 86400000)
				+ CAST(ROUND((julianday(h.probe_at) - julianday(COALESCE(h.failing_since, h.probe_at))) * 86400000) AS INTEGER) / 10 <= 0))`

// probeArgs are the parameters of probeDue at now.
func (s *Sweeper) probeArgs(now time.Time) map[string]any {
	return map[string]any{
		"probe_max_before": now.Add(-s.cfg.ProbeInterval),
		"probe_min_before": now.Add(-FirstProbeGap),
	}
}

// selectWaiting reads the health of each enabled failing webhook of an
// enabled tenant with a due row that is not queued: the webhooks whose
// next probe a tick may wait for.
// It reads webhook_health whole (one row per webhook, as the step's count
// of webhooks reads webhooks), and per failing webhook the index
// deliveries_due_webhook; it runs at most once a tick, when the tick would
// otherwise end.
const selectWaiting = `SELECT h.webhook_id, h.failing_since, h.failures, h.probe_id, h.probe_at
FROM webhook_health h
JOIN webhooks w ON w.id = h.webhook_id
JOIN tenants t ON t.name = w.tenant AND t.enabled
WHERE h.failures >= @failing AND w.enabled AND EXISTS (
	SELECT 1 FROM deliveries d
	WHERE d.webhook_id = h.webhook_id AND d.status = 'Failed' AND d.next_retry <= @now
		AND (d.queued_at IS NULL OR d.queued_at <= @stale))`

// nextProbeBefore reports whether a failing webhook with rows waiting may be
// probed before end, so that a tick which would end keeps looking instead
// of leaving that probe to the next tick, up to sweeper.interval late.
func (s *Sweeper) nextProbeBefore(ctx context.Context, now, end time.Time) (bool, error) {
	var waiting []models.WebhookHealth
	err := s.db.WithContext(ctx).Raw(selectWaiting, map[string]any{
		"failing": models.FailingAfter,
		"now":     now,
		"stale":   now.Add(-s.queuedLease()),
	}).Scan(&waiting).Error
	if err != nil {
		return false, fmt.Errorf("read failing webhooks' next probes: %w", err)
	}
	for _, h := range waiting {
		next, ok := nextProbe(h, s.cfg.ProbeInterval)
		if !ok || next.Before(end) {
			return true, nil
		}
	}
	return false, nil
}
