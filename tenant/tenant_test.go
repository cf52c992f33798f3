package tenant_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/clock"
	"github.com/homingdev/homing/handoff"
	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tenant"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Disabling a tenant makes its pending retries Exhausted and tells the
// observer how many of each webhook's, with reason tenant_disabled, on
// both databases (UPDATE … RETURNING); another tenant's are left alone.
func TestDisableCountsExhaustedByWebhook(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			_, rdb := testenv.Redis(t)
			hand := handoff.New(rdb, nil)
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			svc := tenant.New(db, clock.NewStub(now), nil)
			svc.SetObserver(hand)
			ctx := context.Background()
			for _, n := range []string{"globex", "acme"} {
				if _, err := svc.Create(ctx, n, tenant.Patch{}); err != nil {
					t.Fatal(err)
				}
			}
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
				}
			}
			seed("globex", "orders", 3, models.StatusFailed)
			seed("globex", "quotes", 2, models.StatusFailed)
			seed("globex", "orders", 1, models.StatusDelivered) // final already
			seed("acme", "orders", 4, models.StatusFailed)      // another tenant's

			off := false
			if _, err := svc.Update(ctx, "globex", tenant.Patch{Enabled: &off}); err != nil {
				t.Fatal(err)
			}
			got, err := hand.Drain(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[handoff.Count]bool{
				{Tenant: "globex", Webhook: "orders", Status: models.StatusExhausted, Reason: models.ReasonTenantDisabled, N: 3}: true,
				{Tenant: "globex", Webhook: "quotes", Status: models.StatusExhausted, Reason: models.ReasonTenantDisabled, N: 2}: true,
			}
			if len(got) != len(want) {
				t.Fatalf("told %v, want %v", got, want)
			}
			for _, c := range got {
				if !want[c] {
					t.Errorf("told %+v", c)
				}
			}
			var exhausted, failed int64
			db.Model(&models.Delivery{}).Where("tenant = ? AND status = ? AND last_error = ?", "globex", models.StatusExhausted, "tenant disabled").Count(&exhausted)
			db.Model(&models.Delivery{}).Where("tenant = ? AND status = ?", "acme", models.StatusFailed).Count(&failed)
			if exhausted != 5 || failed != 4 {
				t.Errorf("globex has %d deliveries Exhausted by the disable, want 5; acme %d Failed, want 4", exhausted, failed)
			}
		})
	}
}
