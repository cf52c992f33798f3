package recovery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// seedTenant creates tenant acme with an Exhausted delivery "ex" of
// webhook "orders", created an hour before t0, whose one attempt was
// answered status (of class).
func seedTenant(t *testing.T, db *gorm.DB, status int, class string) *tenant.Service {
	t.Helper()
	svc := tenant.New(db, clock.NewStub(t0), nil)
	if _, err := svc.Create(context.Background(), "acme", tenant.Patch{}); err != nil {
		t.Fatal(err)
	}
	row := testenv.PlannedDelivery("ex", "ev-ex", "w", t0.Add(-time.Hour))
	row.Tenant, row.WebhookName, row.Status, row.NextRetry, row.Attempts = "acme", "orders", models.StatusExhausted, nil, 1
	if err := db.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	attempt(t, db, "ex", status, class)
	return svc
}

// attempt records delivery id's first attempt, answered status.
func attempt(t *testing.T, db *gorm.DB, id string, status int, class string) {
	t.Helper()
	a := models.Attempt{DeliveryID: id, Tenant: "acme", Attempt: 1, At: t0.Add(-time.Hour), Method: "POST", URL: "http://127.0.0.1:1/",
		RequestHeaders: models.StringMap{}, StatusCode: &status, Class: class}
	if err := db.Create(&a).Error; err != nil {
		t.Fatal(err)
	}
}

// A disabled tenant's deliveries are neither retried, resent nor
// recovered (dry run included): each is refused with tenant.ErrDisabled,
// saying how to enable the tenant, and nothing is written. Enabled again,
// the same calls go through.
func TestRecoveryRefusesADisabledTenant(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			tenants := seedTenant(t, db, 503, "5xx")
			svc := recovery.New(db, clock.NewStub(t0), 0)
			off, on := false, true
			if _, err := tenants.Update(ctx, "acme", tenant.Patch{Enabled: &off}); err != nil {
				t.Fatal(err)
			}
			f := recovery.Filter{Webhook: "orders", Since: 24 * time.Hour}
			calls := map[string]func() error{
				"retry":      func() error { return svc.Retry(ctx, "acme", "ex") },
				"resend":     func() error { _, err := svc.Resend(ctx, "acme", "ex"); return err },
				"resendOnce": func() error { _, _, err := svc.ResendOnce(ctx, "acme", "ex", "k"); return err },
				"recover":    func() error { _, err := svc.Recover(ctx, "acme", f, false, nil); return err },
				"dry run":    func() error { _, err := svc.Recover(ctx, "acme", f, true, nil); return err },
			}
			for what, call := range calls {
				if err := call(); !errors.Is(err, tenant.ErrDisabled) || !strings.Contains(err.Error(), "--enable") {
					t.Errorf("%s of a disabled tenant's delivery: %v; want tenant.ErrDisabled saying how to enable it", what, err)
				}
			}
			var rows []models.Delivery
			if err := db.Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Status != models.StatusExhausted {
				t.Fatalf("after the refusals: %+v; want the one delivery, untouched", rows)
			}
			if _, err := tenants.Update(ctx, "acme", tenant.Patch{Enabled: &on}); err != nil {
				t.Fatal(err)
			}
			if err := svc.Retry(ctx, "acme", "ex"); err != nil {
				t.Errorf("retry once the tenant is enabled again: %v", err)
			}
			if _, err := svc.Resend(ctx, "acme", "ex"); err != nil {
				t.Errorf("resend once the tenant is enabled again: %v", err)
			}
		})
	}
}

// A delivery whose history holds a 2xx reached its receiver, whatever its
// status says (an outcome that landed after the row was made final, as a
// disable used to): recover leaves it out, and a retry is refused with
// ErrDelivered, pointing to resend. The same delivery without the 2xx is
// recovered.
func TestRecoveryNeverResendsWhatWasAnswered2xx(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			seedTenant(t, db, 200, "2xx")
			second := testenv.PlannedDelivery("failed", "ev-failed", "w", t0.Add(-time.Hour))
			second.Tenant, second.WebhookName, second.Status, second.NextRetry, second.Attempts = "acme", "orders", models.StatusExhausted, nil, 1
			if err := db.Create(&second).Error; err != nil {
				t.Fatal(err)
			}
			attempt(t, db, "failed", 503, "5xx")
			svc := recovery.New(db, clock.NewStub(t0), 0)
			f := recovery.Filter{Webhook: "orders", Since: 24 * time.Hour}
			if n, err := svc.Recover(ctx, "acme", f, true, nil); err != nil || n != 1 {
				t.Errorf("dry run: %d, %v; want 1 (the delivery answered 2xx left out)", n, err)
			}
			if n, err := svc.Recover(ctx, "acme", f, false, nil); err != nil || n != 1 {
				t.Errorf("recover: %d, %v; want 1", n, err)
			}
			if err := svc.Retry(ctx, "acme", "ex"); !errors.Is(err, recovery.ErrDelivered) || !strings.Contains(err.Error(), "resend") {
				t.Errorf("retry of a delivery answered 2xx: %v; want ErrDelivered, pointing to resend", err)
			}
			var ex, rec models.Delivery
			if err := db.Where("id = ?", "ex").Take(&ex).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Where("id = ?", "failed").Take(&rec).Error; err != nil {
				t.Fatal(err)
			}
			if ex.Status != models.StatusExhausted || rec.Status != models.StatusFailed {
				t.Errorf("after recover and retry: the 2xx one is %s, the 503 one %s; want Exhausted (left alone), Failed (requeued)", ex.Status, rec.Status)
			}
		})
	}
}
