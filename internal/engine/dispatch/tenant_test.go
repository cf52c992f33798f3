package dispatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// tenantBed is a dispatcher on db with the tenant acme and, in it, a
// webhook on the event task's queue ("default": sent inline) and one on
// another ("slow": queued), both to rc, and a workflow_transition webhook.
func tenantBed(t *testing.T, db *gorm.DB, rc *testreceiver.Receiver) (*Dispatcher, *clock.Stub) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	if err := db.Create(&models.Tenant{Name: "acme", Enabled: true, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ id, event, queue string }{{"inline", "on_submit", "default"}, {"queued", "on_submit", "slow"}, {"sync", models.EventWorkflowTransition, "default"}} {
		if err := db.Create(&models.Webhook{
			ID: w.id, Tenant: "acme", Name: w.id, DocType: "Sales Order", DocEvent: w.event, RequestURL: rc.URL + "/" + w.id,
			RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
			Enabled: true, MaxRetries: 3, Queue: w.queue, TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
		}).Error; err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewStub(now)
	sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
	t.Cleanup(sender.Close)
	return New(db, sender, nil, Config{Clock: clk}), clk
}

func setTenant(t *testing.T, db *gorm.DB, on bool) {
	t.Helper()
	if err := db.Model(&models.Tenant{}).Where("name = ?", "acme").Update("enabled", on).Error; err != nil {
		t.Fatal(err)
	}
}

// A disabled tenant's event sends nothing and loses nothing: fan-out
// keeps both of its deliveries (the inline one written unclaimed, the
// queued one's first attempt refused before any request), each Failed and
// due with no attempt counted; a workflow_transition is refused, saying
// why. Enabled again, each delivery is sent once by its retry.
func TestDisabledTenantSendsNothingAndLosesNothing(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			rc := testreceiver.New(t)
			d, clk := tenantBed(t, db, rc)
			ctx := context.Background()
			setTenant(t, db, false)

			var (
				mu     sync.Mutex
				queued []Pending
			)
			ev := Event{Tenant: "acme", ID: "ev-1", DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", Doc: map[string]any{"name": "SO-1"}}
			err := d.HandleEvent(ctx, ev, Inline{Queue: "default", Enqueue: func(_ context.Context, p Pending) error {
				mu.Lock()
				defer mu.Unlock()
				queued = append(queued, p)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			var rows []models.Delivery
			if err := db.Where("event_id = ?", "ev-1").Order("webhook_id").Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 {
				t.Fatalf("a disabled tenant's event left %d deliveries, want 2 kept for when it is enabled again", len(rows))
			}
			if len(queued) != 1 || queued[0].WebhookName != "queued" {
				t.Fatalf("first attempts queued: %+v, want the one of webhook queued", queued)
			}
			_, err = d.Attempt(ctx, queued[0].ID, First)
			if !errors.Is(err, ErrTenantDisabled) || !errors.Is(err, ErrNotClaimed) {
				t.Fatalf("first attempt of a disabled tenant's delivery: %v, want ErrTenantDisabled", err)
			}
			for _, id := range []string{rows[0].ID, rows[1].ID} {
				row := loadRow(t, db, id)
				if row.Status != models.StatusFailed || row.Attempts != 0 || row.NextRetry == nil || row.NextRetry.After(clk.Now()) {
					t.Errorf("%s while its tenant is disabled: %s, %d attempts, due %v; want Failed, unattempted, due by %v",
						row.WebhookName, row.Status, row.Attempts, row.NextRetry, clk.Now())
				}
				if _, err := d.Attempt(ctx, id, Retry); !errors.Is(err, ErrTenantDisabled) {
					t.Errorf("retry of %s while its tenant is disabled: %v, want ErrTenantDisabled", row.WebhookName, err)
				}
			}
			wf := Event{Tenant: "acme", ID: "wf-1", DocType: "Sales Order", DocName: "SO-1", Event: models.EventWorkflowTransition, Doc: map[string]any{"name": "SO-1"}}
			_, err = d.DeliverNow(ctx, wf)
			var serr *event.SyncError
			if !errors.As(err, &serr) || len(serr.Failures) != 1 || !strings.Contains(serr.Failures[0].Error, "tenant") {
				t.Fatalf("workflow_transition of a disabled tenant: %v, want a SyncError saying the tenant is disabled", err)
			}
			if n := rc.Count(); n != 0 {
				t.Fatalf("the receiver got %d requests from a disabled tenant, want 0", n)
			}

			setTenant(t, db, true)
			for _, r := range rows {
				out, err := d.Attempt(ctx, r.ID, Retry)
				if err != nil || out.Status != models.StatusDelivered {
					t.Fatalf("%s once its tenant is enabled again: %+v, %v; want Delivered", r.WebhookName, out, err)
				}
			}
			for id, n := range rc.CountBy("webhook-id") {
				if n != 1 {
					t.Errorf("delivery %s reached the receiver %d times, want once", id, n)
				}
			}
			if n := rc.Count(); n != 2 {
				t.Errorf("the receiver got %d requests, want 2: each kept delivery once", n)
			}
		})
	}
}
