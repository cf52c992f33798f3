package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// An event whose condition is false for an ordered webhook makes no
// delivery of it, yet held the document's later deliveries while it
// waited in the outbox. Its fan-out, once its outbox row is released,
// wakes the next one and queues its first attempt, instead of leaving it
// to the sweep's recheck a minute later.
func TestAnEventThatMakesNoOrderedDeliveryWakesTheNext(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	now := time.Now().UTC().Truncate(time.Second)
	if err := db.Create(&models.Webhook{
		ID: "wo", Name: "orders", DocType: "Sales Order", DocEvent: "on_update", RequestURL: "http://127.0.0.1:1/orders",
		RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
		ConditionLanguage: models.ConditionExpr, Condition: `doc.ship == true`, Ordering: models.OrderingDocument,
		Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
	}).Error; err != nil {
		t.Fatal(err)
	}
	clk := clock.NewStub(now)
	sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
	t.Cleanup(sender.Close)
	d := New(db, sender, nil, Config{Clock: clk})
	ctx := context.Background()

	// Two versions of SO-1 accepted through the outbox: v1 (not to be
	// shipped: the condition is false), then v2.
	dt, dn, de := "Sales Order", "SO-1", "on_update"
	outbox := func(id string) int64 {
		row := models.OutboxEvent{Tenant: models.DefaultTenant, EventID: id, Payload: "{}", CreatedAt: now, DocType: &dt, DocName: &dn, DocEvent: &de}
		if err := db.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		return row.ID
	}
	seq1, seq2 := outbox("v1"), outbox("v2")
	var queued []Pending
	in := Inline{Queue: "default", Outbox: true, Enqueue: func(_ context.Context, p Pending) error {
		queued = append(queued, p)
		return nil
	}}
	event := func(id string, seq int64, ship bool) Event {
		return Event{ID: id, DocType: dt, DocName: dn, Event: de, Doc: map[string]any{"name": dn, "ship": ship}, AcceptSeq: seq}
	}

	// v2's task runs first: v1 still waits in the outbox, so v2's delivery
	// is held: not claimed at insert, and its first attempt refused by its
	// claim, due at the recheck.
	if err := d.HandleEvent(ctx, event("v2", seq2, true), in); err != nil {
		t.Fatal(err)
	}
	for _, p := range queued {
		if _, err := d.Attempt(ctx, p.ID, First); !errors.Is(err, ErrNotClaimed) {
			t.Fatalf("first attempt of v2 while v1 waits in the outbox: %v, want refused", err)
		}
	}
	queued = nil
	var v2 models.Delivery
	if err := db.Where("event_id = ?", "v2").Take(&v2).Error; err != nil {
		t.Fatal(err)
	}
	if v2.Attempts != 0 || v2.NextRetry == nil || !v2.NextRetry.Equal(now.Add(storage.OrderRecheck)) {
		t.Fatalf("v2 behind v1 in the outbox: %d attempts, due %v; want held to its recheck %v", v2.Attempts, v2.NextRetry, now.Add(storage.OrderRecheck))
	}

	// v1's fan-out writes nothing for the webhook and releases its outbox
	// row: v2 is due now and its first attempt queued.
	clk.Advance(time.Second)
	if err := d.HandleEvent(ctx, event("v1", seq1, false), in); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.Model(&models.Delivery{}).Where("event_id = ?", "v1").Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("v1 made %d deliveries (%v), want none: its condition is false", n, err)
	}
	if len(queued) != 1 || queued[0].ID != v2.ID || queued[0].WebhookName != "orders" || queued[0].Queue != "default" {
		t.Fatalf("queued after v1's fan-out: %+v, want v2's first attempt (%s)", queued, v2.ID)
	}
	got := loadRow(t, db, v2.ID)
	if got.NextRetry == nil || !got.NextRetry.Equal(clk.Now()) || got.Attempts != 0 {
		t.Fatalf("v2 after v1's fan-out: due %v, %d attempts; want due now %v, unattempted", got.NextRetry, got.Attempts, clk.Now())
	}
}
