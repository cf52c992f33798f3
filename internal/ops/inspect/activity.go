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

// ReadActivity reads tenant's activity in the 24 hours up to now. The
// closed hours come from the rollup (rolledRows); the hours not yet closed
// (at most the last one and a quarter) from two queries, each one index
// range scan counted into 24 columns: deliveries by
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
	sp := splitWindow(a.Start, end, now)
	rolled, err := rolledRows(ctx, db, models.TenantOr(tenant), "", sp.rolled, now)
	if err != nil {
		return a, err
	}
	for _, r := range rolled {
		h := int(r.Hour.Sub(a.Start) / time.Hour)
		if h < 0 || h >= ActivityHours || r.Deliveries == 0 && r.Failed == 0 {
			continue // a webhook whose hours only succeeded retries is no line of the chart
		}
		w := hook(r.Webhook)
		w.Hours[h].Deliveries += r.Deliveries
		w.Hours[h].Failures += r.Failed
		w.Deliveries += r.Deliveries
		w.Failures += r.Failed
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
	for _, r := range sp.live {
		deliveries := r.where(db.WithContext(ctx).Table("deliveries d").Where("d.tenant = ?", models.TenantOr(tenant)), "d.created_at")
		if err := count(deliveries, "d.created_at", func(w *WebhookActivity, h int, n int64) {
			w.Hours[h].Deliveries += n
			w.Deliveries += n
		}); err != nil {
			return a, fmt.Errorf("count deliveries by hour: %w", err)
		}
		failed := r.where(db.WithContext(ctx).Table("delivery_attempts a").Joins("JOIN deliveries d ON d.id = a.delivery_id").
			Where("a.tenant = ? AND a.class <> '2xx'", models.TenantOr(tenant)), "a.at")
		if err := count(failed, "a.at", func(w *WebhookActivity, h int, n int64) {
			w.Hours[h].Failures += n
			w.Failures += n
		}); err != nil {
			return a, fmt.Errorf("count failed attempts by hour: %w", err)
		}
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
// created in the day before now: the closed hours from the rollup, the rest
// by created_at (deliveries_created), the failing by status
// (deliveries_status_created_tenant, index only), one grouped scan of
// webhooks.
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
	since := now.UTC().Add(-24 * time.Hour)
	created, err := createdByTenant(ctx, db, AllTenants, since, now)
	if err != nil {
		return nil, err
	}
	for tenant, n := range created {
		if i, ok := idx[tenant]; ok {
			out[i].Deliveries = n
		}
	}
	var failing []struct {
		Tenant string
		N      int64
	}
	if err := db.WithContext(ctx).Model(&models.Delivery{}).Select("tenant, COUNT(*) AS n").
		Where("status IN (?, ?) AND created_at >= ?", models.StatusFailed, models.StatusExhausted, since).Group("tenant").Scan(&failing).Error; err != nil {
		return nil, fmt.Errorf("count failing deliveries by tenant: %w", err)
	}
	for _, f := range failing {
		if i, ok := idx[f.Tenant]; ok {
			out[i].Failing = f.N
		}
	}
	return out, nil
}

// createdByTenant counts the deliveries created at or after since, by
// tenant (tenant's only, unless AllTenants): the closed hours from the
// rollup, the rest by created_at (deliveries_tenant_created for one
// tenant, deliveries_created for all, index only for one).
func createdByTenant(ctx context.Context, db *gorm.DB, tenant string, since, now time.Time) (map[string]int64, error) {
	sp := splitWindow(since, time.Time{}, now)
	rolled, err := rolledRows(ctx, db, tenant, "", sp.rolled, now)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rolled {
		out[r.Tenant] += r.Deliveries
	}
	for _, r := range sp.live {
		var live []struct {
			Tenant string
			N      int64
		}
		q := inTenant(db.WithContext(ctx).Model(&models.Delivery{}), "tenant", tenant)
		if err := r.where(q, "created_at").Select("tenant, COUNT(*) AS n").Group("tenant").Scan(&live).Error; err != nil {
			return nil, fmt.Errorf("count deliveries since %s: %w", r.from.Format(time.RFC3339), err)
		}
		for _, l := range live {
			out[l.Tenant] += l.N
		}
	}
	return out, nil
}
