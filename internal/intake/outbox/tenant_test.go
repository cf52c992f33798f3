package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// An event ID is unique per tenant: the same ID in two tenants is two
// events, each one's repeat is its own, by Add and by the Writer alike; a
// tenant that does not exist, or is disabled, has its events refused; and
// the completer releases only the tenant's row.
func TestOutboxKeysEventsByTenant(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			for _, n := range []string{"acme", "globex"} {
				if err := db.Create(&models.Tenant{Name: n, Enabled: n == "acme", CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
					t.Fatal(err)
				}
			}
			ev := sampleEvent("ev-1")
			if got, err := outbox.Add(ctx, db, ev, t0); err != nil || got != outbox.Added {
				t.Fatalf("default's ev-1: %v, %v", got, err)
			}
			ev.Tenant = "acme"
			if got, err := outbox.Add(ctx, db, ev, t0); err != nil || got != outbox.Added {
				t.Fatalf("acme's ev-1: %v, %v; want a new event", got, err)
			}
			if got, err := outbox.Add(ctx, db, ev, t0); err != nil || got != outbox.Requeued {
				t.Fatalf("acme's ev-1 again: %v, %v; want its own repeat", got, err)
			}
			w := outbox.NewWriter(db, outbox.WriterConfig{})
			ev2 := sampleEvent("ev-2")
			if got, err := w.AddJSON(ctx, ev2, []byte(`{"name": "SO-1"}`), t0); err != nil || got != outbox.Added {
				t.Fatalf("writer, default's ev-2: %v, %v", got, err)
			}
			ev2.Tenant = "acme"
			if got, err := w.AddJSON(ctx, ev2, []byte(`{"name": "SO-1"}`), t0); err != nil || got != outbox.Added {
				t.Fatalf("writer, acme's ev-2: %v, %v; want a new event", got, err)
			}
			if got, err := w.AddJSON(ctx, ev2, []byte(`{"name": "SO-2"}`), t0); err != nil || got != outbox.Conflict {
				t.Fatalf("writer, acme's ev-2 with another body: %v, %v; want Conflict", got, err)
			}
			for _, tenant := range []string{"globex", "nope"} {
				ev.Tenant = tenant
				if _, err := outbox.Add(ctx, db, ev, t0); !errors.Is(err, outbox.ErrTenant) {
					t.Errorf("an event of tenant %s: %v, want ErrTenant", tenant, err)
				}
			}
			if err := outbox.NewCompleter(db).FannedOut(ctx, "acme", "ev-1"); err != nil {
				t.Fatal(err)
			}
			var left []models.OutboxEvent
			if err := db.Where("event_id = ?", "ev-1").Find(&left).Error; err != nil || len(left) != 1 || left[0].Tenant != "default" {
				t.Fatalf("ev-1's outbox rows after acme's fan-out: %+v (%v), want default's alone", left, err)
			}
		})
	}
}
