package tasks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// An event accepted through the outbox lets it go once fanned out: with its
// deliveries' commit (PostgreSQL) or right after it (the reference store),
// and through the worker's own release when it matches no webhook at all.
// An event published with client.Publish has no row to release. Each
// event's doctype × event pair is recorded for the portal's event list.
func TestFannedOutEventsLeaveTheOutbox(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{pg, sqlite} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			rc := testreceiver.New(t)
			h.createWebhook("orders", rc.URL, nil)
			ctx := context.Background()
			outboxed := func(ev client.Event) {
				t.Helper()
				var payload string
				if err := h.db.Transaction(func(tx *gorm.DB) error {
					if _, err := client.PublishTx(ctx, tx, ev); err != nil {
						return err
					}
					return tx.Model(&models.OutboxEvent{}).Where("event_id = ?", ev.ID).Pluck("payload", &payload).Error
				}); err != nil {
					t.Fatal(err)
				}
				// The relay's part, done here: queue the row's task.
				c := asynq.NewClient(h.redis)
				defer c.Close()
				if _, err := c.Enqueue(event.OutboxTask("", ev.ID, []byte(payload), time.Now(), 0, "")); err != nil {
					t.Fatal(err)
				}
			}
			outboxed(salesOrder("ev-matched"))
			unmatched := salesOrder("ev-unmatched")
			unmatched.DocType = "Item"
			outboxed(unmatched)
			testenv.Eventually(t, "ev-matched Delivered", func() bool {
				return h.statuses("ev-matched")[models.StatusDelivered] == 1
			})
			testenv.Eventually(t, "the outbox empty", func() bool {
				var left []string
				if err := h.db.Model(&models.OutboxEvent{}).Pluck("event_id", &left).Error; err != nil {
					t.Fatal(err)
				}
				return len(left) == 0
			})
			if n := rc.Count(); n != 1 {
				t.Fatalf("receiver got %d requests, want 1", n)
			}
			// Both pairs are in the portal's event list (tenant.Published),
			// the one no webhook matched too.
			var pairs []string
			if err := h.db.Model(&models.PublishedType{}).Where("tenant = ?", models.DefaultTenant).
				Order("doc_type").Pluck("doc_type || ':' || event", &pairs).Error; err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(pairs) != "[Item:on_submit Sales Order:on_submit]" {
				t.Errorf("event_types of the default tenant: %v, want Item:on_submit and Sales Order:on_submit", pairs)
			}
		})
	}
}
