package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// homing tenant manages tenants; --tenant scopes the other commands; a
// token made with --tenant belongs to that tenant; delete refuses while the
// tenant has webhooks unless --force, and never deletes default.
func TestTenantCommands(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok("migrate")

	created := object(t, s.ok("tenant", "create", "acme", "--max-webhooks", "5", "--action-rate", "3", "--json").stdout)
	checkKeys(t, "tenant create --json", created, []string{"name", "enabled", "portal_origins", "max_webhooks", "publish_rate", "action_rate", "queues", "portal_advanced", "event_types", "product_name", "logo_url", "accent_color", "support_url", "created_at", "updated_at"})
	if created["name"] != "acme" || created["enabled"] != true || created["max_webhooks"] != float64(5) || created["action_rate"] != float64(3) {
		t.Fatalf("tenant create --json = %v", created)
	}
	// The portal's settings: shown, replaced, refused naming the pair.
	portal := object(t, s.ok("tenant", "update", "acme", "--portal-advanced", "--event-type", "Invoice:on_submit", "--event-type", "Customer:after_insert", "--json").stdout)
	if portal["portal_advanced"] != true || fmt.Sprint(portal["event_types"]) != "[Invoice:on_submit Customer:after_insert]" || portal["max_webhooks"] != float64(5) {
		t.Fatalf("tenant update --portal-advanced --event-type = %v", portal)
	}
	s.fails(1, []string{"tenant", "update", "acme", "--event-type", "Invoice:paid"}, `"Invoice:paid"`, "is not one of")
	if out := s.ok("tenant", "show", "acme").stdout; !strings.Contains(out, "portal_advanced: true") || !strings.Contains(out, "Invoice:on_submit, Customer:after_insert") {
		t.Fatalf("tenant show:\n%s", out)
	}
	portal = object(t, s.ok("tenant", "update", "acme", "--portal-advanced=false", "--event-type", "", "--json").stdout)
	if portal["portal_advanced"] != false || len(portal["event_types"].([]any)) != 0 {
		t.Fatalf("tenant update --portal-advanced=false --event-type '' = %v", portal)
	}
	s.ok("tenant", "create", "globex")
	// The portal's theme: checked, saying what to fix; the colour kept in
	// lower case; '' unsets a value.
	themed := object(t, s.ok("tenant", "update", "acme", "--product-name", "Acme Hooks", "--accent-color", "#0A7D5A",
		"--logo-url", "https://cdn.acme.example/logo.svg", "--support-url", "https://acme.example/help", "--json").stdout)
	if themed["product_name"] != "Acme Hooks" || themed["accent_color"] != "#0a7d5a" || themed["logo_url"] != "https://cdn.acme.example/logo.svg" || themed["support_url"] != "https://acme.example/help" {
		t.Fatalf("tenant update with a theme --json = %v", themed)
	}
	s.fails(1, []string{"tenant", "update", "acme", "--accent-color", "teal"}, `accent_color "teal"`, "#rrggbb")
	s.fails(1, []string{"tenant", "update", "acme", "--logo-url", "http://cdn.acme.example/logo.svg"}, `logo_url "http://cdn.acme.example/logo.svg"`, "must be https")
	if out := s.ok("tenant", "update", "acme", "--support-url", "").stdout; !strings.Contains(out, "product_name:   Acme Hooks") || !strings.Contains(out, "support_url:    \n") {
		t.Fatalf("tenant update --support-url '':\n%s", out)
	}
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
	s.ok(append(create("orders"), "--tenant", "acme", "--description", "Orders into the ERP")...)
	s.ok(append(create("orders"), "--tenant", "globex")...)
	if out := s.ok("webhook", "show", "orders", "--tenant", "acme").stdout; !strings.Contains(out, "Orders into the ERP") {
		t.Fatalf("webhook show lacks the description:\n%s", out)
	}
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
