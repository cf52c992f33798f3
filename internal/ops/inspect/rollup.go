package inspect

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/models"
)

// The console's 24-hour reads (the overview's day, the deliveries page's
// chart, a webhook's success rate) count closed hours from a rollup
// (migration 0018, activity_rollup) and only the rest from the deliveries
// and attempts themselves. An hour is counted once, by the first read that
// needs it, for every tenant at once; nothing is written on the worker's
// path.
//
// What the rollup keeps never changes once its hour is closed: deliveries
// by created_at, attempts by at and class. A delivery's status does change
// (a retry delivers it hours later), so no count by status is kept: the
// overview reads Failed and Exhausted live and derives Delivered.
//
// What can now happen twice? Two readers (two homing serve processes) may
// find the same hour missing at once: each inserts the hour's row in
// activity_rollup_hours first, ON CONFLICT DO NOTHING, and only the one whose
// insert created it counts the hour; on PostgreSQL the other waits on the
// key until the first commits, then skips it. The counts are never added
// twice.

// rollupSettle is how long after an hour ends it may be rolled up. A
// delivery's row commits moments after its created_at, but an attempt's row
// is written when its request ends, up to webhook.MaxTimeout (5 minutes)
// after its at; the rest allows for the clocks of different machines. A
// row that lands in an hour already rolled up is not counted by the rollup
// (TestRollupSettleOutlastsTheLongestAttempt holds this against
// webhook.MaxTimeout).
const rollupSettle = 10 * time.Minute

// RollupSettle is rollupSettle, for the test that holds it against
// webhook.MaxTimeout.
const RollupSettle = rollupSettle

// rollupKeep is how long rolled-up hours are kept: the oldest are deleted
// when a newer hour is rolled. Every read covers at most the last day.
const rollupKeep = 48 * time.Hour

// rolledBefore is the end of the newest hour the rollup may hold at now.
func rolledBefore(now time.Time) time.Time {
	return now.UTC().Add(-rollupSettle).Truncate(time.Hour)
}

// timeRange is [from, to); a zero to leaves it open.
type timeRange struct{ from, to time.Time }

// where adds the range as a condition on column.
func (r timeRange) where(q *gorm.DB, column string) *gorm.DB {
	q = q.Where(column+" >= ?", r.from)
	if !r.to.IsZero() {
		q = q.Where(column+" < ?", r.to)
	}
	return q
}

// span is a window split into the whole hours the rollup answers and the
// ranges read live.
type span struct {
	// rolled is the whole closed hours inside the window; empty when
	// rolled.from == rolled.to.
	rolled timeRange
	// live is the rest: the part of an hour at the window's start, and
	// everything from the end of the rolled hours (or the start, when
	// none) to the window's end.
	live []timeRange
}

// splitWindow splits [from, to) at now (to may be zero: open).
func splitWindow(from, to, now time.Time) span {
	from = from.UTC()
	first := from.Truncate(time.Hour)
	if first.Before(from) {
		first = first.Add(time.Hour)
	}
	last := rolledBefore(now)
	if !to.IsZero() && to.UTC().Truncate(time.Hour).Before(last) {
		last = to.UTC().Truncate(time.Hour)
	}
	if !last.After(first) {
		return span{rolled: timeRange{from, from}, live: []timeRange{{from, to}}}
	}
	s := span{rolled: timeRange{first, last}}
	if first.After(from) {
		s.live = append(s.live, timeRange{from, first})
	}
	if to.IsZero() || to.After(last) {
		s.live = append(s.live, timeRange{last, to})
	}
	return s
}

// rollHours makes sure every hour in r (whole, closed hours) is in the
// rollup: one read of activity_rollup_hours, then one transaction per hour
// missing. It returns how many hours it rolled up itself.
func rollHours(ctx context.Context, db *gorm.DB, r timeRange, now time.Time) (int, error) {
	if !r.to.After(r.from) {
		return 0, nil
	}
	var done []models.RolledHour
	// Served by activity_rollup_hours' primary key.
	if err := db.WithContext(ctx).Where("hour >= ? AND hour < ?", r.from, r.to).Find(&done).Error; err != nil {
		return 0, fmt.Errorf("read rolled-up hours: %w", err)
	}
	have := make(map[int64]bool, len(done))
	for _, h := range done {
		have[h.Hour.Unix()] = true
	}
	rolled := 0
	for h := r.from; h.Before(r.to); h = h.Add(time.Hour) {
		if have[h.Unix()] {
			continue
		}
		counted, err := rollHour(ctx, db, h, now)
		if err != nil {
			return rolled, err
		}
		if counted {
			rolled++
		}
	}
	return rolled, nil
}

// rollHour counts the hour starting at hour, every tenant's, into the
// rollup, unless another reader did (see the package's comment on what can
// happen twice), and deletes the hours older than rollupKeep. counted says
// this call counted it.
func rollHour(ctx context.Context, db *gorm.DB, hour, now time.Time) (counted bool, err error) {
	end := hour.Add(time.Hour)
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&models.RolledHour{Hour: hour, RolledAt: now.UTC()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return nil
		}
		counted = true
		type key struct{ tenant, webhook string }
		counts := map[key]*models.ActivityHour{}
		row := func(tenant, webhook string) *models.ActivityHour {
			k := key{tenant, webhook}
			if c, ok := counts[k]; ok {
				return c
			}
			c := &models.ActivityHour{Tenant: tenant, Webhook: webhook, Hour: hour}
			counts[k] = c
			return c
		}
		var created []struct {
			Tenant, WebhookName string
			N                   int64
		}
		// Served by deliveries_created (created_at).
		if err := tx.Model(&models.Delivery{}).Select("tenant, webhook_name, COUNT(*) AS n").
			Where("created_at >= ? AND created_at < ?", hour, end).Group("tenant, webhook_name").Scan(&created).Error; err != nil {
			return fmt.Errorf("count deliveries: %w", err)
		}
		for _, c := range created {
			row(c.Tenant, c.WebhookName).Deliveries = c.N
		}
		var made []struct {
			Tenant, WebhookName         string
			Attempts, Succeeded, Failed int64
		}
		// Served by delivery_attempts_at (at), each attempt's delivery by
		// its primary key.
		if err := tx.Table("delivery_attempts a").Joins("JOIN deliveries d ON d.id = a.delivery_id").
			Select("a.tenant AS tenant, d.webhook_name AS webhook_name, COUNT(*) AS attempts, "+
				"COALESCE(SUM(CASE WHEN a.class = '2xx' THEN 1 ELSE 0 END), 0) AS succeeded, "+
				"COALESCE(SUM(CASE WHEN a.class <> '2xx' THEN 1 ELSE 0 END), 0) AS failed").
			Where("a.at >= ? AND a.at < ?", hour, end).Group("a.tenant, d.webhook_name").Scan(&made).Error; err != nil {
			return fmt.Errorf("count attempts: %w", err)
		}
		for _, m := range made {
			c := row(m.Tenant, m.WebhookName)
			c.Attempts, c.Succeeded, c.Failed = m.Attempts, m.Succeeded, m.Failed
		}
		if len(counts) > 0 {
			rows := make([]*models.ActivityHour, 0, len(counts))
			for _, c := range counts {
				rows = append(rows, c)
			}
			if err := tx.CreateInBatches(rows, 500).Error; err != nil {
				return fmt.Errorf("store counts: %w", err)
			}
		}
		old := hour.Add(-rollupKeep)
		if err := tx.Where("hour < ?", old).Delete(&models.ActivityHour{}).Error; err != nil {
			return fmt.Errorf("delete counts before %s: %w", old.Format(time.RFC3339), err)
		}
		if err := tx.Where("hour < ?", old).Delete(&models.RolledHour{}).Error; err != nil {
			return fmt.Errorf("delete hours before %s: %w", old.Format(time.RFC3339), err)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("roll up the hour of %s: %w", hour.Format(time.RFC3339), err)
	}
	return counted, nil
}

// RollUp rolls up every closed hour of the console's window (the last 24
// hours at now) that is not yet, so that no console read pays for it: the
// worker runs it with the hourly retention task (tasks.HandleRetention). A
// read still rolls up an hour it finds missing (one that closed since, or
// every hour of the day on the first read after an upgrade made before the
// task ran). It returns how many hours it rolled up.
func RollUp(ctx context.Context, db *gorm.DB, now time.Time) (int, error) {
	return rollHours(ctx, db, splitWindow(now.Add(-24*time.Hour), time.Time{}, now).rolled, now)
}

// rolledRows reads tenant's rollup rows (AllTenants: every tenant's) in r,
// after rolling up what is missing; webhook narrows them to one webhook
// when not "". Served by activity_rollup's primary key.
func rolledRows(ctx context.Context, db *gorm.DB, tenant, webhook string, r timeRange, now time.Time) ([]models.ActivityHour, error) {
	if !r.to.After(r.from) {
		return nil, nil
	}
	if _, err := rollHours(ctx, db, r, now); err != nil {
		return nil, err
	}
	q := inTenant(db.WithContext(ctx).Model(&models.ActivityHour{}), "tenant", tenant)
	if webhook != "" {
		q = q.Where("webhook_name = ?", webhook)
	}
	var rows []models.ActivityHour
	if err := q.Where("hour >= ? AND hour < ?", r.from, r.to).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read rolled-up hours: %w", err)
	}
	return rows, nil
}
