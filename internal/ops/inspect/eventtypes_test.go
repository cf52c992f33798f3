package inspect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// TestEventCatalog: a tenant's catalog holds the pairs its fan-outs
// recorded and its deliveries record, those declared for it and those its webhooks listen to, each
// once, by doctype then event; none of another tenant's, and a declared
// pair that does not parse is left out.
func TestEventCatalog(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			if err := db.Create(&models.Tenant{Name: "acme", Enabled: true, CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Create(&models.Webhook{ID: "w-acme", Tenant: "acme", Name: "hook", DocType: "Customer", DocEvent: "after_insert",
				RequestURL: "https://example.com", RequestMethod: "POST", RequestStructure: "json", SignatureScheme: "none", Queue: "default",
				Enabled: true, MaxRetries: 3, TimeoutMS: 1000, CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
				t.Fatal(err)
			}
			event := func(tenant, docType, ev string) {
				t.Helper()
				id := addDelivery(t, db, "hook", t0.Add(time.Minute))
				if err := db.Model(&models.Delivery{}).Where("id = ?", id).
					Updates(map[string]any{"tenant": tenant, "doc_type": docType, "doc_event": ev}).Error; err != nil {
					t.Fatal(err)
				}
			}
			event("acme", "Sales Order", "on_submit")
			event("acme", "Sales Order", "on_submit")
			event("acme", "Invoice", "on_cancel")
			event(models.DefaultTenant, "Purchase Order", "on_submit")
			// Recorded by fan-out (tenant.Published), though no webhook
			// matched it: no delivery has it.
			if err := db.Create(&models.PublishedType{Tenant: "acme", DocType: "Quotation", Event: "on_submit", FirstSeen: t0}).Error; err != nil {
				t.Fatal(err)
			}
			got, err := inspect.EventCatalog(ctx, db, "acme", []string{"Invoice:on_submit", "Sales Order:on_submit", "not a pair"})
			if err != nil {
				t.Fatal(err)
			}
			want := "[Customer:after_insert Invoice:on_cancel Invoice:on_submit Quotation:on_submit Sales Order:on_submit]"
			var names []string
			for _, et := range got {
				names = append(names, et.String())
			}
			if fmt.Sprint(names) != want {
				t.Errorf("catalog %v, want %s", names, want)
			}
		})
	}
}
