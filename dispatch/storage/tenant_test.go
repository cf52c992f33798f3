package storage

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// insertTenant creates tenant name, enabled.
func insertTenant(t testing.TB, db *gorm.DB, name string) {
	t.Helper()
	now := time.Now().UTC()
	if err := db.Create(&models.Tenant{Name: name, Enabled: true, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
}

// insertTenantWebhook is insertWebhook in tenant, named name.
func insertTenantWebhook(t testing.TB, db *gorm.DB, tenant, id, name string) error {
	t.Helper()
	now := time.Now().UTC()
	return db.Create(&models.Webhook{
		ID: id, Tenant: tenant, Name: name, DocType: "Sales Order", DocEvent: "on_submit", RequestURL: "http://127.0.0.1:1/" + id,
		RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
		Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 1000, CreatedAt: now, UpdatedAt: now,
	}).Error
}

// planTenant plans one row of event per webhook, in the webhook's tenant
// (as dispatch does), and records which webhooks it was asked with.
func planTenant(event string, asked *[]string) Plan {
	return func(hooks []models.Webhook) []models.Delivery {
		*asked = nil
		now := time.Now().UTC().Truncate(time.Microsecond)
		var rows []models.Delivery
		for _, w := range hooks {
			*asked = append(*asked, w.Tenant+"/"+w.ID)
			row := planned(event+"-"+w.ID+"-"+now.Format("150405.000000"), event, w.ID, now)
			row.Tenant = w.Tenant
			rows = append(rows, row)
		}
		return rows
	}
}

// Two tenants with webhooks of the same name, doctype and event each get
// only their own deliveries, both may publish the same event ID, and a
// disabled tenant's webhooks match nothing.
func TestFanOutKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		ctx := context.Background()
		insertTenant(t, db, "acme")
		insertTenant(t, db, "globex")
		for _, h := range [][2]string{{"acme", "wa"}, {"globex", "wg"}, {"default", "wd"}} {
			if err := insertTenantWebhook(t, db, h[0], h[1], "orders"); err != nil {
				t.Fatalf("webhook orders in %s: %v", h[0], err)
			}
		}
		if err := insertTenantWebhook(t, db, "acme", "wa2", "orders"); err == nil {
			t.Fatal("a second webhook named orders in acme was accepted; want the (tenant, name) key to refuse it")
		}

		var asked []string
		for _, c := range []struct{ tenant, want string }{{"acme", "acme/wa"}, {"globex", "globex/wg"}, {"", "default/wd"}} {
			w, err := s.FanOut(ctx, EventKey{Tenant: c.tenant, DocType: "Sales Order", Event: "on_submit"}, planTenant("ev-1", &asked))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(asked, []string{c.want}) || !w.Created || len(w.Rows) != 1 {
				t.Fatalf("tenant %q: asked with %v, written %+v; want only %s, created", c.tenant, asked, w, c.want)
			}
		}
		var got []string
		if err := db.Model(&models.Delivery{}).Where("event_id = ?", "ev-1").Order("tenant").
			Select("tenant || '/' || webhook_id").Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{"acme/wa", "default/wd", "globex/wg"}) {
			t.Fatalf("deliveries of ev-1: %v, want one per tenant, each to its own webhook", got)
		}
		// A repeat in one tenant creates nothing and reports only its own.
		w, err := s.FanOut(ctx, EventKey{Tenant: "acme", DocType: "Sales Order", Event: "on_submit"}, planTenant("ev-1", &asked))
		if err != nil || w.Created || len(w.Existing) != 1 || w.Existing[0].WebhookID != "wa" {
			t.Fatalf("acme's repeat of ev-1: %+v, %v; want nothing created and wa's row existing", w, err)
		}
		rows, err := s.EventDeliveries(ctx, "globex", "ev-1")
		if err != nil || len(rows) != 1 || rows[0].WebhookName != "hook-wg" {
			t.Fatalf("globex's deliveries of ev-1: %+v, %v; want its one", rows, err)
		}
		if err := db.Model(&models.Delivery{}).Where("id = ?", rows[0].ID).Pluck("tenant", &got).Error; err != nil || got[0] != "globex" {
			t.Fatalf("EventDeliveries(globex) answered a row of %v (%v)", got, err)
		}

		// A disabled tenant's webhooks do not fire, even from a cache.
		if err := db.Model(&models.Tenant{}).Where("name = ?", "globex").Update("enabled", false).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := s.FanOut(ctx, EventKey{Tenant: "globex", DocType: "Sales Order", Event: "on_submit"}, planTenant("ev-2", &asked)); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.Model(&models.Delivery{}).Where("event_id = ?", "ev-2").Count(&n).Error; err != nil || n != 0 {
			t.Fatalf("disabled tenant's event wrote %d deliveries (%v), want 0", n, err)
		}
	})
}
