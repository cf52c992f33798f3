package inspect

import (
	"context"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/dispatch"
	tenantpkg "github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/models"
)

// WebhookStats is one webhook's line in `homing stats`.
type WebhookStats struct {
	Webhook   string `json:"webhook"`
	Delivered int64  `json:"delivered"`
	Failed    int64  `json:"failed"`
	Exhausted int64  `json:"exhausted"`
	// AttemptsLastHour and SuccessRateLastHour cover attempts made in the
	// hour before now; the rate is null when there were none.
	AttemptsLastHour    int64    `json:"attempts_last_hour"`
	SuccessRateLastHour *float64 `json:"success_rate_last_hour"`
	// Health is healthy, degraded (failures since the last success) or
	// failing (due retries held back behind one probe): models.WebhookHealth.State;
	// FailingSince and HeldBack say since when, and how many wait.
	Health       string     `json:"health"`
	FailingSince *time.Time `json:"failing_since"`
	HeldBack     int64      `json:"held_back"`
}

// Stats answers "how is delivery going" at a glance.
type Stats struct {
	ByStatus      map[string]int64 `json:"by_status"`
	Webhooks      []WebhookStats   `json:"webhooks"`
	FailedBacklog int64            `json:"failed_backlog"`
	DueNow        int64            `json:"due_now"`
	OldestOverdue *time.Time       `json:"oldest_overdue_next_retry"`
	// OutboxPending counts committed events no relay has queued yet, and
	// OutboxOldest is when the oldest was published: old rows mean no relay
	// is running (no scheduler) or Redis is unreachable.
	OutboxPending int64      `json:"outbox_pending"`
	OutboxOldest  *time.Time `json:"outbox_oldest_created_at"`
	// NotSent are Failed deliveries a worker could not send for a reason
	// on Homing's side (a secret secrets.key does not open, a url_template
	// that does not render), by webhook and cause: they stay stuck until
	// the configuration or the webhook is fixed.
	NotSent []NotSent `json:"not_sent"`
	At      time.Time `json:"at"`
}

// NotSent counts the deliveries of one webhook stuck for one cause.
type NotSent struct {
	Webhook string `json:"webhook"`
	Cause   string `json:"cause"`
	Count   int64  `json:"count"`
}

// ComputeStats reads the statistics as of now.
func ComputeStats(ctx context.Context, db *gorm.DB, now time.Time) (Stats, error) {
	now = now.UTC()
	st := Stats{ByStatus: map[string]int64{}, At: now}
	for _, s := range Statuses {
		st.ByStatus[s] = 0
	}
	var rows []struct {
		WebhookName string
		Status      string
		N           int64
	}
	if err := db.WithContext(ctx).Model(&models.Delivery{}).
		Select("webhook_name, status, COUNT(*) AS n").Group("webhook_name, status").Scan(&rows).Error; err != nil {
		return st, fmt.Errorf("count deliveries: %w", err)
	}
	by := map[string]*WebhookStats{}
	get := func(name string) *WebhookStats {
		if w, ok := by[name]; ok {
			return w
		}
		w := &WebhookStats{Webhook: name}
		by[name] = w
		return w
	}
	for _, r := range rows {
		st.ByStatus[r.Status] += r.N
		w := get(r.WebhookName)
		switch r.Status {
		case models.StatusDelivered:
			w.Delivered = r.N
		case models.StatusFailed:
			w.Failed = r.N
		case models.StatusExhausted:
			w.Exhausted = r.N
		}
	}
	st.FailedBacklog = st.ByStatus[models.StatusFailed]
	var hour []struct {
		WebhookName string
		Total       int64
		OK          int64
	}
	if err := db.WithContext(ctx).Table("delivery_attempts a").
		Select("d.webhook_name AS webhook_name, COUNT(*) AS total, SUM(CASE WHEN a.class = '2xx' THEN 1 ELSE 0 END) AS ok").
		Joins("JOIN deliveries d ON d.id = a.delivery_id").
		Where("a.at >= ? AND a.at <= ?", now.Add(-time.Hour), now).
		Group("d.webhook_name").Scan(&hour).Error; err != nil {
		return st, fmt.Errorf("count recent attempts: %w", err)
	}
	for _, h := range hour {
		w := get(h.WebhookName)
		w.AttemptsLastHour = h.Total
		if h.Total > 0 {
			rate := float64(h.OK) / float64(h.Total)
			w.SuccessRateLastHour = &rate
		}
	}
	var err error
	if st.DueNow, st.OldestOverdue, err = dueBacklog(ctx, db, AllTenants, now); err != nil {
		return st, err
	}
	if st.OutboxPending, st.OutboxOldest, err = outboxBacklog(ctx, db, AllTenants); err != nil {
		return st, err
	}
	if err := webhookHealth(ctx, db, now, get); err != nil {
		return st, err
	}
	if err := notSent(ctx, db, &st); err != nil {
		return st, err
	}
	for _, w := range by {
		if w.Health == "" {
			w.Health = "healthy"
		}
		st.Webhooks = append(st.Webhooks, *w)
	}
	sort.Slice(st.Webhooks, func(i, j int) bool { return st.Webhooks[i].Webhook < st.Webhooks[j].Webhook })
	if st.Webhooks == nil {
		st.Webhooks = []WebhookStats{}
	}
	return st, nil
}

// webhookHealth fills in the health of every webhook that has failed since
// its last success, and for those failing the due retries they hold back
// (deliveries_due_webhook).
func webhookHealth(ctx context.Context, db *gorm.DB, now time.Time, get func(string) *WebhookStats) error {
	var rows []struct {
		Name string
		models.WebhookHealth
	}
	if err := db.WithContext(ctx).Table("webhook_health h").
		Select("w.name AS name, h.*").
		Joins("JOIN webhooks w ON w.id = h.webhook_id").
		Where("h.failures > 0 OR h.failing_since IS NOT NULL").Scan(&rows).Error; err != nil {
		return fmt.Errorf("read webhook health: %w", err)
	}
	for _, r := range rows {
		hl, err := webhook.ReadHealth(ctx, db, r.Name, r.WebhookHealth, now)
		if err != nil {
			return err
		}
		w := get(r.Name)
		w.Health, w.FailingSince, w.HeldBack = hl.State, hl.FailingSince, hl.HeldBack
	}
	return nil
}

// dueBacklog counts the Failed deliveries whose retry is due at now, and
// reads the next_retry of the oldest (nil when none is due). A disabled
// tenant's are left out: they are held until it is enabled again, not owed
// (tenant.EnabledRows). Served by deliveries_due.
func dueBacklog(ctx context.Context, db *gorm.DB, tenant string, now time.Time) (int64, *time.Time, error) {
	var n int64
	if err := inTenant(db.WithContext(ctx).Model(&models.Delivery{}), "tenant", tenant).Where("status = ? AND next_retry <= ?", models.StatusFailed, now).
		Where(tenantpkg.EnabledRows).Count(&n).Error; err != nil {
		return 0, nil, fmt.Errorf("count due deliveries: %w", err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	var oldest models.Delivery
	if err := inTenant(db.WithContext(ctx).Select("next_retry"), "tenant", tenant).Where("status = ? AND next_retry <= ?", models.StatusFailed, now).
		Where(tenantpkg.EnabledRows).Order("next_retry").Take(&oldest).Error; err != nil {
		return n, nil, fmt.Errorf("oldest due delivery: %w", err)
	}
	t := oldest.NextRetry.UTC()
	return n, &t, nil
}

// outboxBacklog counts the outbox's events and reads when the oldest was
// published (nil when the outbox is empty).
func outboxBacklog(ctx context.Context, db *gorm.DB, tenant string) (int64, *time.Time, error) {
	var n int64
	if err := inTenant(db.WithContext(ctx).Model(&models.OutboxEvent{}), "tenant", tenant).Count(&n).Error; err != nil {
		return 0, nil, fmt.Errorf("count outbox events: %w", err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	var oldest models.OutboxEvent
	// Served by outbox_events' primary key: ids grow with time.
	if err := inTenant(db.WithContext(ctx).Select("created_at"), "tenant", tenant).Order("id").Take(&oldest).Error; err != nil {
		return n, nil, fmt.Errorf("oldest outbox event: %w", err)
	}
	t := oldest.CreatedAt.UTC()
	return n, &t, nil
}

// notSent fills st.NotSent: Failed deliveries whose last_error says a
// worker could not send them (dispatch.NotSentPrefix). Served by the
// partial index of Failed deliveries.
func notSent(ctx context.Context, db *gorm.DB, st *Stats) error {
	st.NotSent = []NotSent{}
	if err := db.WithContext(ctx).Model(&models.Delivery{}).
		Select("webhook_name AS webhook, last_error AS cause, COUNT(*) AS count").
		Where("status = ? AND last_error LIKE ?", models.StatusFailed, dispatch.NotSentPrefix+"%").
		Group("webhook_name, last_error").Order("webhook_name, last_error").Scan(&st.NotSent).Error; err != nil {
		return fmt.Errorf("count deliveries not sent: %w", err)
	}
	return nil
}

// AllTenants, given as the tenant of a read that takes one, reads every
// tenant's rows: homing stats is the operator's view of the whole install.
const AllTenants = ""

// inTenant restricts q to tenant's rows (column names the tenant column),
// or leaves it whole for AllTenants.
func inTenant(q *gorm.DB, column, tenant string) *gorm.DB {
	if tenant == AllTenants {
		return q
	}
	return q.Where(column+" = ?", tenant)
}
