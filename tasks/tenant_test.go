package tasks_test

import (
	"context"
	"testing"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// End to end through Redis and the worker: two tenants with a webhook of
// the same name on the same doctype and event publish the same event ID;
// each receiver gets its own tenant's event once and nothing of the other's,
// and each delivery and attempt belongs to its tenant.
func TestTenantsAreDeliveredApart(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			ctx := context.Background()
			if _, err := tenant.New(h.db, nil, nil).Create(ctx, "acme", tenant.Patch{}); err != nil {
				t.Fatal(err)
			}
			def, acme := testreceiver.New(t), testreceiver.New(t)
			h.createWebhook("orders", def.URL+"/default", nil)
			in := webhook.Input{Name: ptr("orders"), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr(acme.URL + "/acme")}
			if _, err := h.hooks.Create(ctx, "acme", in); err != nil {
				t.Fatal(err)
			}
			ev := salesOrder("ev-shared")
			h.publish(ev)
			ev.Tenant = "acme"
			h.publish(ev)
			var rows []models.Delivery
			testenv.Eventually(t, "both tenants delivered", func() bool {
				rows = nil
				if err := h.db.Where("event_id = ? AND status = ?", "ev-shared", models.StatusDelivered).Order("tenant").Find(&rows).Error; err != nil {
					t.Fatal(err)
				}
				return len(rows) == 2
			})
			if rows[0].Tenant != "acme" || rows[1].Tenant != "default" {
				t.Fatalf("deliveries of ev-shared in %s and %s, want acme and default", rows[0].Tenant, rows[1].Tenant)
			}
			for _, c := range []struct {
				recv *testreceiver.Receiver
				path string
			}{{def, "/default"}, {acme, "/acme"}} {
				reqs := c.recv.Requests()
				if len(reqs) != 1 || reqs[0].Path != c.path {
					t.Errorf("receiver %s got %d requests (%v), want its own tenant's one", c.path, len(reqs), reqs)
				}
			}
			var attempts []string
			if err := h.db.Model(&models.Attempt{}).Where("delivery_id = ?", rows[0].ID).Pluck("tenant", &attempts).Error; err != nil || len(attempts) != 1 || attempts[0] != "acme" {
				t.Errorf("acme's attempt rows in tenants %v (%v), want acme", attempts, err)
			}
		})
	}
}
