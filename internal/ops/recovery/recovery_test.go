package recovery_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// TestResendOnceMakesOneDelivery: a resend asked for again with the same key
// (a button pressed twice, two racing clients) makes one new delivery.
func TestResendOnceMakesOneDelivery(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			orig := models.Delivery{
				ID: "d-1", WebhookID: "w-1", WebhookName: "orders", EventID: "ev-1", DocType: "Note", DocEvent: "on_update",
				Method: "POST", URL: "https://example.com", Payload: []byte(`{"a":1}`), Status: models.StatusDelivered,
				Attempts: 1, CreatedAt: t0, UpdatedAt: t0,
			}
			if err := db.Create(&orig).Error; err != nil {
				t.Fatal(err)
			}
			svc := recovery.New(db, clock.NewStub(t0.Add(time.Hour)), 0)

			ids := make([]string, 4)
			created := make([]bool, 4)
			var wg sync.WaitGroup
			for i := range ids {
				wg.Go(func() {
					var err error
					if ids[i], created[i], err = svc.ResendOnce(ctx, "", "d-1", "click-1"); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			made := 0
			for i := range ids {
				if ids[i] != ids[0] || ids[i] == "" {
					t.Errorf("resends with one key returned %v, want one ID", ids)
				}
				if created[i] {
					made++
				}
			}
			if made != 1 {
				t.Errorf("%d calls report creating the delivery, want 1", made)
			}
			var rows []models.Delivery
			if err := db.Where("resent_from = ?", "d-1").Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].ID != ids[0] || rows[0].Status != models.StatusFailed || string(rows[0].Payload) != `{"a":1}` {
				t.Fatalf("resent deliveries = %+v, want one, Failed and due, with the frozen payload", rows)
			}

			other, made2, err := svc.ResendOnce(ctx, "", "d-1", "click-2")
			if err != nil || !made2 || other == ids[0] {
				t.Errorf("another key = %q, %v, %v; want a second new delivery", other, made2, err)
			}
			plain, err := svc.Resend(ctx, "", "d-1")
			if err != nil || plain == ids[0] || plain == other {
				t.Errorf("Resend without a key = %q, %v; want a new delivery every time", plain, err)
			}
			for _, bad := range []string{"", "has space", strings.Repeat("k", recovery.MaxKeyLength+1), "tab\t"} {
				if _, _, err := svc.ResendOnce(ctx, "", "d-1", bad); !errors.Is(err, recovery.ErrInvalidKey) {
					t.Errorf("key %q: %v, want ErrInvalidKey", bad, err)
				}
			}
			if _, _, err := svc.ResendOnce(ctx, "", "nope", "k"); !errors.Is(err, recovery.ErrNotFound) {
				t.Errorf("unknown delivery: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestRecoverTakesFailedAndExhaustedByDefault: during an outage the rows
// waiting for their retry are Failed, so a recover without a status takes
// them and the Exhausted ones; a status narrows it, and a row already
// requeued and not tried since is not counted again.
func TestRecoverTakesFailedAndExhaustedByDefault(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			rows := map[string]string{"failed": models.StatusFailed, "exhausted": models.StatusExhausted, "delivered": models.StatusDelivered}
			for id, status := range rows {
				row := testenv.PlannedDelivery(id, "ev-"+id, "w", t0)
				row.Status, row.LastError = status, "receiver answered 503"
				if status != models.StatusFailed {
					row.NextRetry = nil
				}
				if err := db.Create(&row).Error; err != nil {
					t.Fatal(err)
				}
			}
			svc := recovery.New(db, clock.NewStub(t0.Add(time.Hour)), 0)
			all := recovery.Filter{Webhook: "hook-w", Since: 24 * time.Hour}
			for _, tc := range []struct {
				status string
				want   int64
			}{{"", 2}, {models.StatusFailed, 1}, {models.StatusExhausted, 1}} {
				f := all
				f.Status = tc.status
				if n, err := svc.Recover(ctx, "", f, true, nil); err != nil || n != tc.want {
					t.Errorf("dry run with status %q: %d, %v; want %d", tc.status, n, err, tc.want)
				}
			}
			if n, err := svc.Recover(ctx, "", all, false, nil); err != nil || n != 2 {
				t.Fatalf("recover: %d, %v; want 2", n, err)
			}
			for id := range rows {
				var row models.Delivery
				if err := db.Where("id = ?", id).Take(&row).Error; err != nil {
					t.Fatal(err)
				}
				if want := id != "delivered"; want != (row.Status == models.StatusFailed && row.NextRetry.Equal(t0.Add(time.Hour))) {
					t.Errorf("%s after recover: %s due %v", id, row.Status, row.NextRetry)
				}
			}
			if n, err := svc.Recover(ctx, "", all, false, nil); err != nil || n != 0 {
				t.Errorf("second recover: %d, %v; want 0, the rows are already due", n, err)
			}
		})
	}
}

// TestResendOfAnOrderedDeliveryGoesToTheBackOfItsKey: the resend of an
// ordered delivery takes a fresh place, after every delivery of its
// document accepted before it; an unordered delivery's resend stays
// unordered.
func TestResendOfAnOrderedDeliveryGoesToTheBackOfItsKey(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	// Places are drawn from the outbox's sequence, as the fan-out draws
	// them.
	var one, two int64
	if err := db.Raw("SELECT nextval('outbox_events_id_seq')").Scan(&one).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT nextval('outbox_events_id_seq')").Scan(&two).Error; err != nil {
		t.Fatal(err)
	}
	for _, d := range []models.Delivery{
		{ID: "d-1", AcceptSeq: &one, EventID: "ev-1", Status: models.StatusDelivered},
		{ID: "d-2", AcceptSeq: &two, EventID: "ev-2", Status: models.StatusFailed, NextRetry: &t0},
		{ID: "u-1", EventID: "ev-u", Status: models.StatusDelivered},
	} {
		d.WebhookID, d.WebhookName, d.DocType, d.DocName, d.DocEvent = "w-1", "orders", "Note", "N-1", "on_update"
		d.Method, d.URL, d.Payload, d.Attempts, d.CreatedAt, d.UpdatedAt = "POST", "https://example.com", []byte(`{"a":1}`), 1, t0, t0
		if err := db.Create(&d).Error; err != nil {
			t.Fatal(err)
		}
	}
	svc := recovery.New(db, clock.NewStub(t0.Add(time.Hour)), 0)
	id, err := svc.Resend(ctx, "", "d-1")
	if err != nil {
		t.Fatal(err)
	}
	var row models.Delivery
	if err := db.Where("id = ?", id).Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.AcceptSeq == nil || *row.AcceptSeq <= two {
		t.Fatalf("the resend of d-1 has place %d, want one after d-2's (%d)", *row.AcceptSeq, two)
	}
	if id, err = svc.Resend(ctx, "", "u-1"); err != nil {
		t.Fatal(err)
	}
	var plain models.Delivery
	if err := db.Where("id = ?", id).Take(&plain).Error; err != nil || plain.AcceptSeq != nil {
		t.Fatalf("the resend of an unordered delivery has place %v (%v), want none", plain.AcceptSeq, err)
	}
}
