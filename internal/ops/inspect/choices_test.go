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

// TestFilterChoices: the deliveries filter offers a tenant's webhooks by
// name and the doctypes of its webhooks and of its deliveries (a webhook's
// doctype since changed too), each once and sorted; nothing of another
// tenant's.
func TestFilterChoices(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			if err := db.Create(&models.Tenant{Name: "acme", Enabled: true, CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
				t.Fatal(err)
			}
			hook := func(id, tenant, name, docType string) {
				t.Helper()
				if err := db.Create(&models.Webhook{ID: id, Tenant: tenant, Name: name, DocType: docType, DocEvent: "on_submit",
					RequestURL: "https://example.com", RequestMethod: "POST", RequestStructure: "json", SignatureScheme: "none", Queue: "default",
					Enabled: true, MaxRetries: 3, TimeoutMS: 1000, CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
					t.Fatal(err)
				}
			}
			hook("w-1", "acme", "orders", "Sales Order")
			hook("w-2", "acme", "billing", "Sales Invoice")
			hook("w-3", "acme", "more-orders", "Sales Order")
			hook("w-4", models.DefaultTenant, "globex", "Purchase Order")
			id := addDelivery(t, db, "orders", t0.Add(time.Minute))
			if err := db.Model(&models.Delivery{}).Where("id = ?", id).Updates(map[string]any{"tenant": "acme", "doc_type": "Customer"}).Error; err != nil {
				t.Fatal(err)
			}
			got, err := inspect.ReadFilterChoices(ctx, db, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Webhooks) != "[billing more-orders orders]" || fmt.Sprint(got.DocTypes) != "[Customer Sales Invoice Sales Order]" {
				t.Errorf("choices %+v", got)
			}
		})
	}
}
