package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// ActivityHours is how many hours Activity covers, one bucket each.
const ActivityHours = 24

// Activity is a tenant's last 24 hours per webhook, hour by hour: the
// deliveries created and the attempts that failed. Failures are counted
// from the attempts, which stay failed after a drain delivered their
// deliveries, so an outage that was recovered is still visible.
type Activity struct {
	// Start is the start of the first hour; the last ends at the hour
	// after now.
	Start    time.Time
	Webhooks []WebhookActivity
	// Max is the largest count of any hour, the charts' scale.
	Max int64
}

// WebhookActivity is one webhook's hours.
type WebhookActivity struct {
	Webhook              string
	Hours                [ActivityHours]Hour
	Deliveries, Failures int64
}

// Hour is one hour's counts.
type Hour struct {
	Deliveries, Failures int64
}

// ReadActivity reads tenant's activity in the 24 hours up to now. Two
// queries, each one index range scan counted into 24 columns: deliveries by
// deliveries_tenant_created, attempts by delivery_attempts_at.
func ReadActivity(ctx context.Context, db *gorm.DB, tenant string, now time.Time) (Activity, error) {
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	a := Activity{Start: end.Add(-ActivityHours * time.Hour)}
	byName := map[string]*WebhookActivity{}
	hook := func(name string) *WebhookActivity {
		if w, ok := byName[name]; ok {
			return w
		}
		w := &WebhookActivity{Webhook: name}
		byName[name] = w
		return w
	}
	count := func(q *gorm.DB, column string, add func(w *WebhookActivity, h int, n int64)) error {
		cols := make([]string, ActivityHours)
		args := make([]any, 0, 2*ActivityHours)
		for h := range ActivityHours {
			cols[h] = fmt.Sprintf("COALESCE(SUM(CASE WHEN %s >= ? AND %s < ? THEN 1 ELSE 0 END), 0)", column, column)
			args = append(args, a.Start.Add(time.Duration(h)*time.Hour), a.Start.Add(time.Duration(h+1)*time.Hour))
		}
		rows, err := q.Select("d.webhook_name, "+strings.Join(cols, ", "), args...).Group("d.webhook_name").Rows()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			n := make([]int64, ActivityHours)
			dest := []any{&name}
			for h := range n {
				dest = append(dest, &n[h])
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			w := hook(name)
			for h, v := range n {
				add(w, h, v)
			}
		}
		return rows.Err()
	}
	deliveries := db.WithContext(ctx).Table("deliveries d").
		Where("d.tenant = ? AND d.created_at >= ? AND d.created_at < ?", models.TenantOr(tenant), a.Start, end)
	if err := count(deliveries, "d.created_at", func(w *WebhookActivity, h int, n int64) {
		w.Hours[h].Deliveries += n
		w.Deliveries += n
	}); err != nil {
		return a, fmt.Errorf("count deliveries by hour: %w", err)
	}
	failed := db.WithContext(ctx).Table("delivery_attempts a").Joins("JOIN deliveries d ON d.id = a.delivery_id").
		Where("a.at >= ? AND a.at < ? AND a.tenant = ? AND a.class <> '2xx'", a.Start, end, models.TenantOr(tenant))
	if err := count(failed, "a.at", func(w *WebhookActivity, h int, n int64) {
		w.Hours[h].Failures += n
		w.Failures += n
	}); err != nil {
		return a, fmt.Errorf("count failed attempts by hour: %w", err)
	}
	for _, w := range byName {
		for _, h := range w.Hours {
			a.Max = max(a.Max, h.Deliveries, h.Failures)
		}
		a.Webhooks = append(a.Webhooks, *w)
	}
	sort.Slice(a.Webhooks, func(i, j int) bool { return a.Webhooks[i].Webhook < a.Webhooks[j].Webhook })
	return a, nil
}

// TenantCount is one tenant's last day, for an operator's per-tenant
// overview.
type TenantCount struct {
	Tenant     string
	Enabled    bool
	Webhooks   int64
	Deliveries int64
	// Failing counts its deliveries created in the day that are Failed or
	// Exhausted now.
	Failing int64
}

// ReadTenantCounts counts every tenant's webhooks and the deliveries
// created in the day before now. One grouped scan of deliveries by
// created_at (deliveries_created), one of webhooks.
func ReadTenantCounts(ctx context.Context, db *gorm.DB, now time.Time) ([]TenantCount, error) {
	var tenants []models.Tenant
	if err := db.WithContext(ctx).Order("name").Find(&tenants).Error; err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	var hooks []struct {
		Tenant string
		N      int64
	}
	if err := db.WithContext(ctx).Model(&models.Webhook{}).Select("tenant, COUNT(*) AS n").Group("tenant").Scan(&hooks).Error; err != nil {
		return nil, fmt.Errorf("count webhooks by tenant: %w", err)
	}
	var dels []struct {
		Tenant  string
		N       int64
		Failing int64
	}
	if err := db.WithContext(ctx).Model(&models.Delivery{}).
		Select("tenant, COUNT(*) AS n, COALESCE(SUM(CASE WHEN status IN (?, ?) THEN 1 ELSE 0 END), 0) AS failing", models.StatusFailed, models.StatusExhausted).
		Where("created_at >= ?", now.UTC().Add(-24*time.Hour)).Group("tenant").Scan(&dels).Error; err != nil {
		return nil, fmt.Errorf("count deliveries by tenant: %w", err)
	}
	out := make([]TenantCount, len(tenants))
	idx := map[string]int{}
	for i, t := range tenants {
		out[i] = TenantCount{Tenant: t.Name, Enabled: t.Enabled}
		idx[t.Name] = i
	}
	for _, h := range hooks {
		if i, ok := idx[h.Tenant]; ok {
			out[i].Webhooks = h.N
		}
	}
	for _, d := range dels {
		if i, ok := idx[d.Tenant]; ok {
			out[i].Deliveries, out[i].Failing = d.N, d.Failing
		}
	}
	return out, nil
}
