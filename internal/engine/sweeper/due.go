package sweeper

import (
	"context"
	"fmt"
	"time"

	"github.com/homingdev/homing/models"
)

// selectNextDuePostgres finds the earliest retry that comes due after @now
// and before @end and that a step would then take: not queued since
// @stale, of a webhook that is not failing (a failing webhook's rows wait
// for its probe: nextProbeBefore) and not past its rate quota for the tick
// (@spent), of an enabled tenant. Served, as the step's query, by
// webhooks' and tenants' primary keys and per webhook one range read of
// deliveries_due_webhook (webhook_id, next_retry) WHERE status = 'Failed',
// stopping at its first row.
const selectNextDuePostgres = `SELECT p.next_retry
FROM webhooks w
JOIN tenants t ON t.name = w.tenant AND t.enabled
LEFT JOIN webhook_health h ON h.webhook_id = w.id
CROSS JOIN LATERAL (
	SELECT d.next_retry FROM deliveries d
	WHERE d.webhook_id = w.id AND d.status = 'Failed' AND d.next_retry > @now AND d.next_retry < @end
		AND (d.queued_at IS NULL OR d.queued_at <= @stale)
	ORDER BY d.next_retry
	LIMIT 1
) p
WHERE COALESCE(h.failures, 0) < @failing AND NOT (w.id = ANY(CAST(@spent AS text[])))
ORDER BY p.next_retry
LIMIT 1`

// selectNextDueSQLite is selectNextDuePostgres for SQLite, which has no
// LATERAL.
const selectNextDueSQLite = `SELECT d.next_retry
FROM deliveries d
JOIN webhooks w ON w.id = d.webhook_id
JOIN tenants t ON t.name = w.tenant AND t.enabled
LEFT JOIN webhook_health h ON h.webhook_id = w.id
WHERE d.status = 'Failed' AND d.next_retry > @now AND d.next_retry < @end
	AND (d.queued_at IS NULL OR d.queued_at <= @stale)
	AND COALESCE(h.failures, 0) < @failing AND w.id NOT IN @spent
ORDER BY d.next_retry
LIMIT 1`

// nextRetryBefore is when the earliest retry that a step would take comes
// due before end; zero when none does. A tick that found nothing due waits
// for it instead of ending: with a retry.schedule shorter than
// sweeper.interval (100ms in the failing-receiver benchmark), each round of
// retries otherwise waited for the next tick, up to sweeper.interval. It
// runs once each time a tick would end.
func (s *Sweeper) nextRetryBefore(ctx context.Context, st *step, end time.Time) (time.Time, error) {
	args := map[string]any{
		"now": st.now, "end": end, "stale": st.now.Add(-s.queuedLease()), "failing": models.FailingAfter, "spent": st.spent,
	}
	q := selectNextDueSQLite
	if s.selectDue == selectDuePostgres {
		q, args["spent"] = selectNextDuePostgres, pgArray(st.spent)
	} else if len(st.spent) == 0 {
		args["spent"] = []string{""}
	}
	var next []struct{ NextRetry time.Time }
	if err := s.db.WithContext(ctx).Raw(q, args).Scan(&next).Error; err != nil {
		return time.Time{}, fmt.Errorf("read the next retry due: %w", err)
	}
	if len(next) == 0 {
		return time.Time{}, nil
	}
	return next[0].NextRetry, nil
}
