package tenant_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Disabling a tenant holds its pending deliveries, it does not end them:
// each stays Failed with its next_retry (Failed ⇔ next_retry holds), so
// that the claim and the sweep keep it until the tenant is enabled again,
// and nothing final is written that a recover would have to undo. Another
// tenant's, and the tenant's final deliveries, are left alone.
func TestDisableHoldsPendingDeliveries(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			svc := tenant.New(db, clock.NewStub(now), nil)
			ctx := context.Background()
			for _, n := range []string{"globex", "acme"} {
				if _, err := svc.Create(ctx, n, tenant.Patch{}); err != nil {
					t.Fatal(err)
				}
			}
			type state struct {
				status string
				next   string
			}
			want := map[string]state{}
			seed := func(ten, hook string, n int, status string) {
				t.Helper()
				for i := range n {
					row := testenv.PlannedDelivery(fmt.Sprintf("%s-%s-%s-%d", ten, hook, status, i), fmt.Sprintf("ev-%s-%s-%d", ten, status, i), "wh-"+hook, now)
					row.Tenant, row.WebhookName, row.Status = ten, hook, status
					if status != models.StatusFailed {
						row.NextRetry = nil
					}
					if err := db.Create(&row).Error; err != nil {
						t.Fatal(err)
					}
					want[row.ID] = state{row.Status, fmt.Sprint(row.NextRetry)}
				}
			}
			seed("globex", "orders", 3, models.StatusFailed)
			seed("globex", "quotes", 2, models.StatusFailed)
			seed("globex", "orders", 1, models.StatusDelivered)
			seed("globex", "orders", 1, models.StatusExhausted)
			seed("acme", "orders", 4, models.StatusFailed)

			for _, on := range []bool{false, true} {
				got, err := svc.Update(ctx, "globex", tenant.Patch{Enabled: &on})
				if err != nil || got.Enabled != on {
					t.Fatalf("enabled %v: %+v, %v", on, got, err)
				}
				var rows []models.Delivery
				if err := db.Find(&rows).Error; err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					if s := (state{r.Status, fmt.Sprint(r.NextRetry)}); s != want[r.ID] {
						t.Errorf("enabled %v: %s reads %+v, want %+v, as it was", on, r.ID, s, want[r.ID])
					}
				}
			}
		})
	}
}

// An attempt in flight when its tenant is disabled ends with its real
// outcome: the receiver answered 2xx, so the delivery is Delivered, once,
// and nothing is left for a recover to send again.
func TestDisableLetsTheAttemptInFlightFinish(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			svc := tenant.New(db, nil, nil)
			if _, err := svc.Create(ctx, "globex", tenant.Patch{}); err != nil {
				t.Fatal(err)
			}
			rc := testreceiver.New(t)
			now := time.Now().UTC().Truncate(time.Microsecond)
			if err := db.Create(&models.Webhook{
				ID: "wh", Tenant: "globex", Name: "orders", DocType: "Sales Order", DocEvent: "on_submit", RequestURL: rc.URL,
				RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
				Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 10000, CreatedAt: now, UpdatedAt: now,
			}).Error; err != nil {
				t.Fatal(err)
			}
			row := testenv.PlannedDelivery("d1", "ev-1", "wh", now)
			row.Tenant, row.WebhookName = "globex", "orders"
			if err := db.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
			sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
			t.Cleanup(sender.Close)
			d := dispatch.New(db, sender, nil, dispatch.Config{})

			release := rc.Hold()
			type result struct {
				out dispatch.Outcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := d.Attempt(ctx, "d1", dispatch.First)
				done <- result{out, err}
			}()
			testenv.Eventually(t, "the attempt to reach the receiver", func() bool { return rc.Count() == 1 })
			off := false
			if _, err := svc.Update(ctx, "globex", tenant.Patch{Enabled: &off}); err != nil {
				t.Fatal(err)
			}
			release()
			r := <-done
			if r.err != nil || r.out.Status != models.StatusDelivered {
				t.Fatalf("the attempt in flight: %+v, %v; want Delivered", r.out, r.err)
			}
			var got models.Delivery
			if err := db.Where("id = ?", "d1").Take(&got).Error; err != nil {
				t.Fatal(err)
			}
			if got.Status != models.StatusDelivered || got.NextRetry != nil || got.Attempts != 1 {
				t.Fatalf("delivery after its 2xx landed past the disable: %s, next %v, %d attempts; want Delivered, as the receiver answered",
					got.Status, got.NextRetry, got.Attempts)
			}
			if n := rc.Count(); n != 1 {
				t.Fatalf("the receiver got %d requests, want 1", n)
			}
		})
	}
}
