package tenant_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// TestPublishedRecordsEachPairOnce: Record writes a tenant's pair once,
// however many events of it come and however many recorders race (other
// workers), keeps the first time it was seen, writes nothing for a tenant
// without a row, stops at MaxPublishedTypes pairs a tenant, and the pairs
// go with their tenant.
func TestPublishedRecordsEachPairOnce(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			svc := tenant.New(db, nil, nil)
			for _, n := range []string{"acme", "globex"} {
				if _, err := svc.Create(ctx, n, tenant.Patch{}); err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
			now := t0
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			workers := []*tenant.Published{tenant.NewPublished(db, clock), tenant.NewPublished(db, clock), tenant.NewPublished(db, clock)}
			var wg sync.WaitGroup
			for _, p := range workers {
				wg.Go(func() {
					for range 20 {
						if err := p.Record(ctx, "acme", "Sales Order", "on_submit"); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			mu.Lock()
			now = t0.Add(time.Hour)
			mu.Unlock()
			for _, r := range []struct{ tenant, docType, event string }{
				{"acme", "Sales Order", "on_submit"}, // again, from a new process: kept as first seen
				{"acme", "Invoice", "on_cancel"},
				{"globex", "Sales Order", "on_submit"},
				{"initech", "Sales Order", "on_submit"}, // no such tenant: nothing
			} {
				if err := tenant.NewPublished(db, clock).Record(ctx, r.tenant, r.docType, r.event); err != nil {
					t.Fatal(err)
				}
			}
			var rows []models.PublishedType
			if err := db.Order("tenant, doc_type, event").Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, fmt.Sprintf("%s/%s:%s@%s", r.Tenant, r.DocType, r.Event, r.FirstSeen.UTC().Format("15:04")))
			}
			if want := "[acme/Invoice:on_cancel@11:00 acme/Sales Order:on_submit@10:00 globex/Sales Order:on_submit@11:00]"; fmt.Sprint(got) != want {
				t.Errorf("event_types %v, want %s", got, want)
			}

			// A producer inventing doctypes stops adding pairs at the bound.
			p := tenant.NewPublished(db, clock)
			for i := range tenant.MaxPublishedTypes + 5 {
				if err := p.Record(ctx, "globex", fmt.Sprintf("Doc %d", i), "on_update"); err != nil {
					t.Fatal(err)
				}
			}
			var n int64
			if err := db.Model(&models.PublishedType{}).Where("tenant = ?", "globex").Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			if n != tenant.MaxPublishedTypes {
				t.Errorf("globex has %d pairs, want the bound %d", n, tenant.MaxPublishedTypes)
			}

			if err := svc.Delete(ctx, "acme", true, nil); err != nil {
				t.Fatal(err)
			}
			if err := db.Model(&models.PublishedType{}).Where("tenant = ?", "acme").Count(&n).Error; err != nil || n != 0 {
				t.Errorf("acme's pairs after its delete: %d (%v), want 0", n, err)
			}
		})
	}
}
