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

		// A disabled tenant's event is kept, even when its webhooks come
		// from a cache: its rows are written, for its webhooks to send
		// once it is enabled again (the claim holds them until then).
		setTenantEnabled(t, db, "globex", false)
		w, err = s.FanOut(ctx, EventKey{Tenant: "globex", DocType: "Sales Order", Event: "on_submit"}, planTenant("ev-2", &asked))
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.Model(&models.Delivery{}).Where("event_id = ? AND tenant = ? AND status = ?", "ev-2", "globex", models.StatusFailed).Count(&n).Error; err != nil || n != 1 {
			t.Fatalf("disabled tenant's event wrote %d Failed deliveries (%v), want 1, kept for when it is enabled again", n, err)
		}
	})
}

// setTenantEnabled enables or disables tenant name, as tenant.Service does.
func setTenantEnabled(t testing.TB, db *gorm.DB, name string, on bool) {
	t.Helper()
	if err := db.Model(&models.Tenant{}).Where("name = ?", name).Update("enabled", on).Error; err != nil {
		t.Fatal(err)
	}
}

// A disabled tenant's deliveries are claimed by no attempt, first, retry
// or synchronous: the claim's statement reads the tenant, so nothing of
// the tenant's leaves while it is disabled, and the rows stay as they
// were, attempts uncounted. Enabled again, the same claims take them.
func TestClaimRefusesADisabledTenant(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		ctx := context.Background()
		insertTenant(t, db, "acme")
		if err := insertTenantWebhook(t, db, "acme", "wa", "orders"); err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		first := planned("first", "ev-1", "wa", now)
		retry := planned("retry", "ev-2", "wa", now.Add(-time.Hour))
		retry.Attempts, retry.NextRetry = 1, ptrTime(now.Add(-time.Second))
		sync := planned("sync", "ev-3", "wa", now)
		sync.Status, sync.NextRetry, sync.LastError = models.StatusExhausted, nil, "pending"
		for _, r := range []*models.Delivery{&first, &retry, &sync} {
			r.Tenant = "acme"
		}
		insertRows(t, db, first, retry, sync)
		claims := []struct {
			id       string
			mode     Mode
			attempts int
		}{{"first", First, 0}, {"retry", Retry, 1}, {"sync", Sync, 0}}

		setTenantEnabled(t, db, "acme", false)
		for _, c := range claims {
			got, err := s.Claim(ctx, ClaimIn{ID: c.id, Mode: c.mode, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got.Claimed || !got.Found || !got.TenantDisabled || got.Hook == nil || !got.Hook.Enabled {
				t.Errorf("%s claim of a disabled tenant's delivery: claimed %v, found %v, tenant disabled %v, hook %v; want it refused, saying why",
					c.mode, got.Claimed, got.Found, got.TenantDisabled, got.Hook)
			}
			if row := loadRow(t, db, c.id); row.Attempts != c.attempts {
				t.Errorf("%s: attempts %d after a refused claim, want %d", c.id, row.Attempts, c.attempts)
			}
		}

		setTenantEnabled(t, db, "acme", true)
		for _, c := range claims {
			got, err := s.Claim(ctx, ClaimIn{ID: c.id, Mode: c.mode, Now: now})
			if err != nil || !got.Claimed || got.TenantDisabled || got.Row.Attempts != c.attempts+1 {
				t.Errorf("%s claim once the tenant is enabled again: %+v, %v; want it taken", c.mode, got, err)
			}
		}
	})
}

// A disabled tenant's event is written whole and kept: every planned row
// as planned, except that a row planned claimed at insert (the event
// task's own first attempt) is written unclaimed, with no attempt counted
// and due at once, and reported in Written.Held. The INSERT reads the
// tenant itself, so a disable that lands between the webhooks' read and
// the INSERT is seen. Enabled again, the same plan claims at insert.
func TestFanOutHoldsADisabledTenantsClaims(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		ctx := context.Background()
		insertTenant(t, db, "acme")
		for _, id := range []string{"wa", "wb"} {
			if err := insertTenantWebhook(t, db, "acme", id, "hook-"+id); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		lease := now.Add(time.Second + LeaseMargin)
		// wa's row is claimed at insert (attempt counted, lease set), as
		// dispatch plans the rows it sends itself; wb's is queued.
		plan := func(event string, disable bool) Plan {
			return func(hooks []models.Webhook) []models.Delivery {
				if disable {
					// The tenant is disabled after its webhooks were read.
					setTenantEnabled(t, db, "acme", false)
				}
				var rows []models.Delivery
				for _, w := range hooks {
					row := planned(event+"-"+w.ID, event, w.ID, now)
					row.Tenant = w.Tenant
					if w.ID == "wa" {
						row.Attempts, row.NextRetry = 1, &lease
					}
					rows = append(rows, row)
				}
				return rows
			}
		}
		key := EventKey{Tenant: "acme", DocType: "Sales Order", Event: "on_submit"}
		for _, c := range []struct {
			event         string
			disableBefore bool
			disableInPlan bool
		}{{"ev-off", true, false}, {"ev-race", false, true}} {
			if c.disableBefore {
				setTenantEnabled(t, db, "acme", false)
			}
			w, err := s.FanOut(ctx, key, plan(c.event, c.disableInPlan))
			if err != nil {
				t.Fatal(err)
			}
			if !w.Created || len(w.Rows) != 2 || !slices.Equal(w.Held, []string{c.event + "-wa"}) {
				t.Errorf("%s: written %+v; want both rows created and %s-wa held", c.event, w, c.event)
			}
			held, queued := loadRow(t, db, c.event+"-wa"), loadRow(t, db, c.event+"-wb")
			if held.Status != models.StatusFailed || held.Attempts != 0 || held.NextRetry == nil || !held.NextRetry.Equal(now) {
				t.Errorf("%s: the row planned claimed reads %s, %d attempts, due %v; want Failed, unattempted, due at once (%v)",
					c.event, held.Status, held.Attempts, held.NextRetry, now)
			}
			if queued.Attempts != 0 || !sameTime(queued.NextRetry, ptrTime(now.Add(time.Minute))) {
				t.Errorf("%s: the row planned unclaimed reads %d attempts, due %v; want it as planned", c.event, queued.Attempts, queued.NextRetry)
			}
			setTenantEnabled(t, db, "acme", true)
		}
		w, err := s.FanOut(ctx, key, plan("ev-on", false))
		if err != nil || !w.Created || len(w.Held) != 0 {
			t.Fatalf("enabled: written %+v, %v; want created, nothing held", w, err)
		}
		if got := loadRow(t, db, "ev-on-wa"); got.Attempts != 1 || !got.NextRetry.Equal(lease) {
			t.Fatalf("enabled: the row planned claimed reads %d attempts, due %v; want claimed at insert", got.Attempts, got.NextRetry)
		}
	})
}
