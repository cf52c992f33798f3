package inspect

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	tenantpkg "github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/models"
)

// Overview answers an operator's first look, cheaply enough for a page that
// refreshes itself at 1,000,000 deliveries: unlike ComputeStats it counts
// only recent rows, and every read is an index range.
type Overview struct {
	// LastHour and LastDay count deliveries created in the hour and the
	// day before At, by status (countSince and countDay).
	LastHour map[string]int64 `json:"last_hour"`
	LastDay  map[string]int64 `json:"last_day"`
	// Scheduled counts the Failed deliveries of enabled tenants: each has
	// its next attempt scheduled, due or not. NextRetry is the soonest
	// next_retry among them (deliveries_due). "Due retries: 0" while six
	// deliveries waited for their retry in minutes was the overview counting
	// only DueNow (issue 38): a retry waiting for its time is scheduled,
	// not absent.
	Scheduled int64      `json:"scheduled"`
	NextRetry *time.Time `json:"next_retry"`
	// DueNow counts those whose retry is due now, and OldestDue is the
	// next_retry of the oldest (deliveries_due).
	DueNow    int64      `json:"due_now"`
	OldestDue *time.Time `json:"oldest_due"`
	// Paused counts the Failed deliveries of disabled tenants: kept, and
	// sent once their tenant is enabled again.
	Paused int64 `json:"paused"`
	// OutboxPending and OutboxOldest are the outbox backlog.
	OutboxPending int64      `json:"outbox_pending"`
	OutboxOldest  *time.Time `json:"outbox_oldest_created_at"`
	// Troubled are the webhooks that are disabled or failing.
	Troubled []Trouble `json:"troubled"`
	At       time.Time `json:"at"`
}

// Trouble is a webhook that is disabled or failing, since when, and why.
type Trouble struct {
	Webhook string `json:"webhook"`
	Enabled bool   `json:"enabled"`
	// State is disabled, or the health state as every view names it
	// (models.WebhookHealth.State).
	State        string     `json:"state"`
	FailingSince *time.Time `json:"failing_since"`
	Failures     int        `json:"failures"`
	// DisabledAt is when a disabled webhook was last changed: when it
	// was disabled, unless it was edited since.
	DisabledAt *time.Time `json:"disabled_at"`
	// DisabledReason is why it was disabled, and LastError the last error
	// recorded on one of its deliveries.
	DisabledReason string `json:"disabled_reason"`
	LastError      string `json:"last_error"`
}

// ReadOverview reads tenant's overview as of now (AllTenants: the whole
// install's).
func ReadOverview(ctx context.Context, db *gorm.DB, tenant string, now time.Time) (Overview, error) {
	now = now.UTC()
	o := Overview{At: now}
	var err error
	if o.LastHour, err = countSince(ctx, db, tenant, now.Add(-time.Hour)); err != nil {
		return o, err
	}
	if o.LastDay, err = countDay(ctx, db, tenant, now.Add(-24*time.Hour), now); err != nil {
		return o, err
	}
	if o.DueNow, o.OldestDue, err = dueBacklog(ctx, db, tenant, now); err != nil {
		return o, err
	}
	if o.Scheduled, o.NextRetry, o.Paused, err = scheduled(ctx, db, tenant); err != nil {
		return o, err
	}
	if o.OutboxPending, o.OutboxOldest, err = outboxBacklog(ctx, db, tenant); err != nil {
		return o, err
	}
	if o.Troubled, err = troubled(ctx, db, tenant); err != nil {
		return o, err
	}
	return o, nil
}

// scheduled counts the Failed deliveries of enabled tenants and reads the
// soonest next_retry among them, and counts the Failed deliveries of
// disabled tenants (held, tenant.EnabledRows). The counts are index-only
// ranges of deliveries_status_created_tenant (status, created_at) INCLUDE
// (tenant): every Failed row is the backlog, so the range is the backlog's
// size; the soonest is the first entry of deliveries_due (next_retry) WHERE
// status = 'Failed' that is the tenant's.
func scheduled(ctx context.Context, db *gorm.DB, tenant string) (n int64, next *time.Time, paused int64, err error) {
	failed := func() *gorm.DB {
		return inTenant(db.WithContext(ctx).Model(&models.Delivery{}), "tenant", tenant).Where("status = ?", models.StatusFailed)
	}
	if err := failed().Where(tenantpkg.EnabledRows).Count(&n).Error; err != nil {
		return 0, nil, 0, fmt.Errorf("count scheduled deliveries: %w", err)
	}
	if err := failed().Where("NOT (" + tenantpkg.EnabledRows + ")").Count(&paused).Error; err != nil {
		return 0, nil, 0, fmt.Errorf("count paused deliveries: %w", err)
	}
	if n == 0 {
		return 0, nil, paused, nil
	}
	var soonest models.Delivery
	if err := failed().Select("next_retry").Where(tenantpkg.EnabledRows).Order("next_retry").Take(&soonest).Error; err != nil {
		return n, nil, paused, fmt.Errorf("soonest scheduled delivery: %w", err)
	}
	if soonest.NextRetry != nil {
		t := soonest.NextRetry.UTC()
		next = &t
	}
	return n, next, paused, nil
}

// countSince counts deliveries created at or after since, by status: one
// count per status, each an index-only range of
// deliveries_status_created_tenant (which carries the tenant since migration
// 0017), reading no table rows (a GROUP BY over deliveries_created would
// read every row of the window from the table).
func countSince(ctx context.Context, db *gorm.DB, tenant string, since time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	for _, s := range Statuses {
		var n int64
		if err := inTenant(db.WithContext(ctx).Model(&models.Delivery{}), "tenant", tenant).Where("status = ? AND created_at >= ?", s, since).
			Count(&n).Error; err != nil {
			return nil, fmt.Errorf("count %s deliveries since %s: %w", s, since.Format(time.RFC3339), err)
		}
		out[s] = n
	}
	return out, nil
}

// countDay counts deliveries created at or after since, by status, the way
// countSince does, but without counting a day's Delivered rows: those are
// most of a day (167,000 at 10,000,000 deliveries) and their count is all
// deliveries created (createdByTenant, mostly from the rollup) less the
// Failed and Exhausted ones, counted live since their status is what
// changes. Retention deletes no Failed row and no row younger than an hour,
// so the difference is never below the live count (it is clamped at 0
// besides); deliveries that retention.delivered under 24 h deleted in the
// day stay counted as Delivered.
func countDay(ctx context.Context, db *gorm.DB, tenant string, since, now time.Time) (map[string]int64, error) {
	created, err := createdByTenant(ctx, db, tenant, since, now)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, n := range created {
		total += n
	}
	out := map[string]int64{}
	rest := total
	for _, s := range Statuses {
		if s == models.StatusDelivered {
			continue
		}
		var n int64
		if err := inTenant(db.WithContext(ctx).Model(&models.Delivery{}), "tenant", tenant).Where("status = ? AND created_at >= ?", s, since).
			Count(&n).Error; err != nil {
			return nil, fmt.Errorf("count %s deliveries since %s: %w", s, since.Format(time.RFC3339), err)
		}
		out[s] = n
		rest -= n
	}
	out[models.StatusDelivered] = max(rest, 0)
	return out, nil
}

// troubled lists the disabled and the failing webhooks, by name, each with
// the last error of its newest delivery that has one
// (deliveries_webhook_created, read backwards).
func troubled(ctx context.Context, db *gorm.DB, tenant string) ([]Trouble, error) {
	var rows []struct {
		Tenant         string
		Name           string
		Enabled        bool
		DisabledReason string
		FailingSince   *time.Time
		Failures       int
		UpdatedAt      time.Time
	}
	if err := inTenant(db.WithContext(ctx).Table("webhooks w"), "w.tenant", tenant).
		Select("w.tenant AS tenant, w.name AS name, w.enabled AS enabled, w.disabled_reason AS disabled_reason, h.failing_since AS failing_since, COALESCE(h.failures, 0) AS failures, w.updated_at AS updated_at").
		Joins("LEFT JOIN webhook_health h ON h.webhook_id = w.id").
		Where("NOT w.enabled OR h.failing_since IS NOT NULL OR h.failures > 0").
		Order("w.name").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list troubled webhooks: %w", err)
	}
	out := make([]Trouble, 0, len(rows))
	for _, r := range rows {
		last, err := LastError(ctx, db, r.Tenant, r.Name)
		if err != nil {
			return nil, err
		}
		var since *time.Time
		if r.FailingSince != nil {
			t := r.FailingSince.UTC()
			since = &t
		}
		t := Trouble{Webhook: r.Name, Enabled: r.Enabled, FailingSince: since, Failures: r.Failures,
			DisabledReason: r.DisabledReason, LastError: last,
			State: models.WebhookHealth{FailingSince: r.FailingSince, Failures: r.Failures}.StateOf(r.Enabled)}
		if !r.Enabled {
			at := r.UpdatedAt.UTC()
			t.DisabledAt = &at
		}
		out = append(out, t)
	}
	return out, nil
}

// LastError is the last_error of tenant's webhook name's newest delivery
// that has one ("" when none): the first entry of deliveries_webhook_error
// (webhook_name, created_at DESC, only rows with a last_error), tenant
// checked on the row.
func LastError(ctx context.Context, db *gorm.DB, tenant, name string) (string, error) {
	var errs []string
	if err := db.WithContext(ctx).Model(&models.Delivery{}).Where("webhook_name = ? AND tenant = ? AND last_error <> ''", name, models.TenantOr(tenant)).
		Order("created_at DESC").Limit(1).Pluck("last_error", &errs).Error; err != nil {
		return "", fmt.Errorf("last error of webhook %q: %w", name, err)
	}
	if len(errs) == 0 {
		return "", nil
	}
	return errs[0], nil
}

// SuccessRate is a webhook's attempts over a window and how many succeeded
// (2xx). Rate is nil when there were none.
type SuccessRate struct {
	Attempts  int64    `json:"attempts"`
	Succeeded int64    `json:"succeeded"`
	Rate      *float64 `json:"rate"`
}

// WebhookSuccessRate counts webhook name's attempts made in the window
// before now: the closed hours from the rollup, the rest (the part of an
// hour at the window's start, and the hours not yet closed) by
// delivery_attempts_at, each attempt's delivery by its primary key.
func WebhookSuccessRate(ctx context.Context, db *gorm.DB, tenant, name string, now time.Time, window time.Duration) (SuccessRate, error) {
	var r SuccessRate
	sp := splitWindow(now.Add(-window), now, now)
	rolled, err := rolledRows(ctx, db, models.TenantOr(tenant), name, sp.rolled, now)
	if err != nil {
		return r, fmt.Errorf("success rate of webhook %q: %w", name, err)
	}
	for _, h := range rolled {
		r.Attempts += h.Attempts
		r.Succeeded += h.Succeeded
	}
	for _, lr := range sp.live {
		var live SuccessRate
		q := db.WithContext(ctx).Table("delivery_attempts a").
			Select("COUNT(*) AS attempts, COALESCE(SUM(CASE WHEN a.class = '2xx' THEN 1 ELSE 0 END), 0) AS succeeded").
			Joins("JOIN deliveries d ON d.id = a.delivery_id").
			Where("d.webhook_name = ? AND d.tenant = ?", name, models.TenantOr(tenant))
		if err := lr.where(q, "a.at").Scan(&live).Error; err != nil {
			return r, fmt.Errorf("success rate of webhook %q: %w", name, err)
		}
		r.Attempts += live.Attempts
		r.Succeeded += live.Succeeded
	}
	if r.Attempts > 0 {
		rate := float64(r.Succeeded) / float64(r.Attempts)
		r.Rate = &rate
	}
	return r, nil
}
