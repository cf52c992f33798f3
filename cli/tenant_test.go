package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/metrics"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/store"
	"github.com/homingdev/homing/tenant"
)

// homing tenant manages tenants; --tenant scopes the other commands; a
// token made with --tenant belongs to that tenant; delete refuses while the
// tenant has webhooks unless --force, and never deletes default.
func TestTenantCommands(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok("migrate")

	created := object(t, s.ok("tenant", "create", "acme", "--max-webhooks", "5", "--action-rate", "3", "--json").stdout)
	checkKeys(t, "tenant create --json", created, []string{"name", "enabled", "portal_origins", "max_webhooks", "publish_rate", "action_rate", "queues", "created_at", "updated_at"})
	if created["name"] != "acme" || created["enabled"] != true || created["max_webhooks"] != float64(5) || created["action_rate"] != float64(3) {
		t.Fatalf("tenant create --json = %v", created)
	}
	s.ok("tenant", "create", "globex")
	s.fails(1, []string{"tenant", "create", "acme"}, `"acme"`, "already exists")
	s.fails(1, []string{"tenant", "create", "Bad Name"}, "a-z")
	// "other" is the metrics' label for the tenants past the bound.
	s.fails(1, []string{"tenant", "create", metrics.OtherWebhooks}, `"other" is reserved`, "metrics.max_tenant_labels")
	if tenant.OverflowLabel != metrics.OtherWebhooks {
		t.Fatalf("tenant.OverflowLabel %q, metrics' overflow label %q", tenant.OverflowLabel, metrics.OtherWebhooks)
	}
	list := array(t, s.ok("tenant", "list", "--json").stdout)
	if len(list) != 3 || list[0]["name"] != "acme" || list[1]["name"] != "default" || list[2]["name"] != "globex" {
		t.Fatalf("tenant list --json = %v", list)
	}

	// The same webhook name in two tenants; each sees only its own.
	s.ok(append(create("orders"), "--tenant", "acme")...)
	s.ok(append(create("orders"), "--tenant", "globex")...)
	if out := s.ok("webhook", "list", "--json").stdout; strings.Contains(out, "orders") {
		t.Fatalf("the default tenant lists another tenant's webhook: %s", out)
	}
	if got := array(t, s.ok("webhook", "list", "--json", "--tenant", "acme").stdout); len(got) != 1 || got[0]["name"] != "orders" {
		t.Fatalf("acme's webhooks: %v", got)
	}
	s.fails(1, []string{"webhook", "show", "orders"}, `"orders"`)
	s.fails(1, []string{"webhook", "list", "--tenant", "nope"}, `"nope"`, "tenant list")

	tok := object(t, s.ok("token", "create", "--name", "acme-admin", "--scope", "admin", "--tenant", "acme", "--json").stdout)
	if tok["tenant"] != "acme" || tok["operator"] != false {
		t.Fatalf("token create --tenant acme --json = %v", tok)
	}
	op := object(t, s.ok("token", "create", "--name", "ops", "--scope", "admin", "--json").stdout)
	if op["tenant"] != "default" || op["operator"] != true {
		t.Fatalf("token create (operator) --json = %v", op)
	}

	// A pending retry of globex's is held by the disable, not ended.
	db, err := store.Open(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	var hook models.Webhook
	if err := db.Where("tenant = ? AND name = ?", "globex", "orders").Take(&hook).Error; err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	pending := testenv.PlannedDelivery("globex-pending", "ev-1", hook.ID, now)
	pending.Tenant = "globex"
	if err := db.Create(&pending).Error; err != nil {
		t.Fatal(err)
	}
	shown := object(t, s.ok("tenant", "disable", "globex", "--json").stdout)
	var after models.Delivery
	if err := db.Where("id = ?", "globex-pending").Take(&after).Error; err != nil || after.Status != models.StatusFailed || after.NextRetry == nil || !after.NextRetry.Equal(*pending.NextRetry) {
		t.Fatalf("globex's pending delivery after the disable: %s due %v (%v), want Failed and due as it was, held", after.Status, after.NextRetry, err)
	}
	if shown["enabled"] != false {
		t.Fatalf("tenant disable = %v", shown)
	}
	if got := object(t, s.ok("tenant", "update", "globex", "--enable", "--publish-rate", "10", "--json").stdout); got["enabled"] != true || got["publish_rate"] != float64(10) {
		t.Fatalf("tenant update --enable = %v", got)
	}
	s.fails(1, []string{"tenant", "disable", "default"}, "default")
	s.fails(1, []string{"tenant", "delete", "default"}, "default", "cannot be deleted")
	s.fails(1, []string{"tenant", "delete", "acme"}, `"acme"`, "--force")
	s.ok("tenant", "delete", "acme", "--force")
	s.fails(1, []string{"tenant", "show", "acme"}, `"acme"`)
	if _, err := s.authenticate(tok["token"].(string)); err == nil {
		t.Error("a deleted tenant's token still authenticates")
	}
	if got := array(t, s.ok("webhook", "list", "--json", "--tenant", "globex").stdout); len(got) != 1 {
		t.Fatalf("globex lost its webhook when acme was deleted: %v", got)
	}
}
