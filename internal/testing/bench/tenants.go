package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/homingdev/homing/client"
)

// The tenants scenario (issue 26): does a fleet of tenants cost the hot path
// anything? The same events and the same three matching webhooks per event
// run twice: spread over -tenants tenants of three webhooks each, and in the
// one default tenant with three webhooks. Event i belongs to tenant
// i mod -tenants, so with the defaults each tenant publishes two events, and
// a worker's first event of each tenant cannot find its webhooks cached:
// the measurement includes those cold reads, as a fleet's worker meets
// them. Target: the CPU per delivery (worker + database) of the fleet at
// most 1.1 × that of one tenant.

// tenantName is the i-th seeded tenant.
func tenantName(i int) string { return fmt.Sprintf("t%05d", i) }

// event is the case's i-th event: Sales Order on_submit, in its tenant (the
// default one when the case has no tenants of its own).
func (tc throughputCase) event(i int) client.Event {
	doc := i
	if tc.docs > 0 {
		doc = i % tc.docs
	}
	ev := client.Event{DocType: "Sales Order", DocName: fmt.Sprintf("SO-%07d", doc), Event: "on_submit", Doc: benchDoc(i)}
	if tc.tenants > 1 {
		ev.Tenant = tenantName(i % tc.tenants)
	}
	return ev
}

// seedTenants makes tenants tenants with hooks webhooks each, as createHooks
// makes them: the first tenant's through the webhook service, then copied
// to every other tenant by one INSERT … SELECT per table, so 10,000 tenants
// take seconds.
func (e *env) seedTenants(ctx context.Context, tenants, hooks, maxRetries int) error {
	db := e.db.WithContext(ctx)
	if err := db.Exec(`INSERT INTO tenants (name, created_at, updated_at)
		SELECT 't' || lpad(i::text, 5, '0'), now(), now() FROM generate_series(0, ?) AS i`, tenants-1).Error; err != nil {
		return fmt.Errorf("seed tenants: %w", err)
	}
	if err := e.createHooksIn(ctx, tenantName(0), hooks, maxRetries); err != nil {
		return err
	}
	var cols []string
	if err := db.Raw(`SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'webhooks' AND column_name NOT IN ('id', 'tenant')
		ORDER BY ordinal_position`).Scan(&cols).Error; err != nil {
		return err
	}
	list := strings.Join(cols, ", ")
	copyHooks := `INSERT INTO webhooks (id, tenant, ` + list + `)
		SELECT w.id || '-' || t.name, t.name, ` + "w." + strings.Join(cols, ", w.") + `
		FROM webhooks w CROSS JOIN tenants t WHERE w.tenant = ? AND t.name NOT IN (?, 'default')`
	if err := db.Exec(copyHooks, tenantName(0), tenantName(0)).Error; err != nil {
		return fmt.Errorf("copy webhooks to every tenant: %w", err)
	}
	var n int64
	if err := db.Raw("SELECT count(*) FROM webhooks WHERE enabled").Scan(&n).Error; err != nil {
		return err
	}
	if int(n) != tenants*hooks {
		return fmt.Errorf("seeded %d enabled webhooks, want %d tenants × %d", n, tenants, hooks)
	}
	return db.Exec("ANALYZE tenants, webhooks").Error
}
