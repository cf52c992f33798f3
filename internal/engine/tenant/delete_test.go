package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// tenantData writes into tenant ten one of everything a tenant owns besides
// its webhooks: a delivery of webhook hookID with its attempt, a published
// event ID, an outbox row, a rollup hour and, when withRow, a token and a
// portal link (which need the tenant's row).
func tenantData(t *testing.T, db *gorm.DB, ten, hookID string, withRow bool) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	d := testenv.PlannedDelivery(ten+"-d", "ev-1", hookID, now)
	d.Tenant, d.Status, d.NextRetry, d.Attempts = ten, models.StatusDelivered, nil, 1
	code := 200
	for _, row := range []any{
		&d,
		&models.Attempt{DeliveryID: d.ID, Tenant: ten, Attempt: 1, At: now, Method: "POST", URL: d.URL, RequestHeaders: models.StringMap{}, StatusCode: &code, Class: "2xx"},
		&models.PublishedEvent{Tenant: ten, EventID: "ev-1", CreatedAt: now},
		&models.OutboxEvent{Tenant: ten, EventID: "ev-2", Payload: "{}", CreatedAt: now},
		&models.ActivityHour{Tenant: ten, Webhook: "orders", Hour: now.Truncate(time.Hour), Deliveries: 1, Attempts: 1, Succeeded: 1},
	} {
		if err := db.Create(row).Error; err != nil {
			t.Fatal(err)
		}
	}
	if !withRow {
		return
	}
	if _, _, err := token.New(db, nil, nil).Create(context.Background(), ten+"-admin", token.ScopeAdmin, ten); err != nil {
		t.Fatal(err)
	}
	if err := db.Create(&models.PortalLink{ID: ten + "-link", Tenant: ten, CreatedBy: "test", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}).Error; err != nil {
		t.Fatal(err)
	}
}

// left counts, table by table, the rows tenant ten still has.
func left(t *testing.T, db *gorm.DB, ten string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for table, m := range map[string]any{
		"webhooks": &models.Webhook{}, "deliveries": &models.Delivery{}, "delivery_attempts": &models.Attempt{},
		"published_events": &models.PublishedEvent{}, "outbox_events": &models.OutboxEvent{}, "activity_rollup": &models.ActivityHour{},
		"api_tokens": &models.APIToken{}, "portal_links": &models.PortalLink{}, "tenants": &models.Tenant{},
	} {
		col := "tenant"
		if table == "tenants" {
			col = "name"
		}
		var n int64
		if err := db.Model(m).Where(col+" = ?", ten).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// Deleting a tenant deletes everything of it: its webhooks (as webhook
// delete does), deliveries with their attempts, published event IDs,
// outbox rows, console rollups, tokens and portal links. --force is needed
// while it has webhooks or deliveries. Another tenant's data stays. The
// name, created again, starts empty: its event IDs are new (a publish of
// ev-1 would not be taken for a repeat) and it sees no delivery of the
// tenant that had it before.
func TestDeleteRemovesEverythingOfTheTenant(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			svc := tenant.New(db, nil, nil)
			hooks := webhook.New(db, testenv.SecretBox(t), nil, webhook.Defaults{MaxRetries: 3, Timeout: 5 * time.Second}, nil)
			ids := map[string]string{}
			for _, ten := range []string{"acme", "globex"} {
				if _, err := svc.Create(ctx, ten, tenant.Patch{}); err != nil {
					t.Fatal(err)
				}
				w, err := hooks.Create(ctx, ten, webhook.Input{Name: ptr("orders"), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr("https://example.com/hook")})
				if err != nil {
					t.Fatal(err)
				}
				ids[ten] = w.ID
				tenantData(t, db, ten, w.ID, true)
			}
			globex := left(t, db, "globex")

			if err := svc.Delete(ctx, "acme", false, hooks); !errors.Is(err, tenant.ErrHasWebhooks) || !strings.Contains(err.Error(), "--force") {
				t.Fatalf("delete without --force: %v, want it refused, naming --force", err)
			}
			if err := svc.Delete(ctx, "acme", true, hooks); err != nil {
				t.Fatal(err)
			}
			if got := left(t, db, "acme"); len(got) != 0 {
				t.Errorf("after delete --force, acme still has %v; want nothing", got)
			}
			if got := left(t, db, "globex"); fmt.Sprint(got) != fmt.Sprint(globex) {
				t.Errorf("globex had %v, has %v after acme's delete", globex, got)
			}

			if _, err := svc.Create(ctx, "acme", tenant.Patch{}); err != nil {
				t.Fatalf("create acme again: %v", err)
			}
			if got := left(t, db, "acme"); fmt.Sprint(got) != "map[tenants:1]" {
				t.Errorf("a re-created acme starts with %v, want nothing but its row", got)
			}
		})
	}
}

// A tenant whose data outlived its row (deleted before delete removed
// it) cannot be created again until its data is gone: the create is
// refused, naming delete --force, which removes what is left; then the
// name starts empty. A tenant with deliveries but no webhook needs --force
// too.
func TestNameIsFreeOnlyOnceItsDataIsGone(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			svc := tenant.New(db, nil, nil)
			hooks := webhook.New(db, testenv.SecretBox(t), nil, webhook.Defaults{MaxRetries: 3, Timeout: 5 * time.Second}, nil)

			tenantData(t, db, "initech", "gone-hook", false) // no tenant row: deleted long ago
			_, err := svc.Create(ctx, "initech", tenant.Patch{})
			if !errors.Is(err, tenant.ErrExists) || !strings.Contains(err.Error(), "homing tenant delete initech --force") {
				t.Fatalf("create over an earlier tenant's data: %v; want it refused, naming delete --force", err)
			}
			if err := svc.Delete(ctx, "initech", false, hooks); !errors.Is(err, tenant.ErrHasWebhooks) {
				t.Fatalf("delete of what is left, without --force: %v; want it refused", err)
			}
			if err := svc.Delete(ctx, "initech", true, hooks); err != nil {
				t.Fatalf("delete --force of what is left: %v", err)
			}
			if got := left(t, db, "initech"); len(got) != 0 {
				t.Fatalf("after delete --force, initech still has %v", got)
			}
			if err := svc.Delete(ctx, "initech", true, hooks); !errors.Is(err, tenant.ErrNotFound) {
				t.Fatalf("delete of a name with nothing left: %v, want ErrNotFound", err)
			}
			if _, err := svc.Create(ctx, "initech", tenant.Patch{}); err != nil {
				t.Fatalf("create once the data is gone: %v", err)
			}
			// Empty: deleted without --force.
			if err := svc.Delete(ctx, "initech", false, hooks); err != nil {
				t.Fatalf("delete of an empty tenant: %v", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
