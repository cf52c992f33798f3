package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/models"
)

// BenchmarkBatchedClaim measures the hot path's claim of a first attempt on
// PostgreSQL (runClaim: claim the row and read it with its webhook in one
// statement) at two batch sizes; ns/delivery is per claimed row. It builds
// only on what the schema had before tenants (the rows are the default
// tenant's), so the same file runs at the commit before migration 0015 and
// measures what the tenant column costs the claim (docs/performance.md,
// Tenants).
func BenchmarkBatchedClaim(b *testing.B) {
	db, batch := batchedFor(b)
	insertWebhook(b, db, "wa", "Sales Order", "on_submit", true)
	ctx := context.Background()
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			now := time.Now().UTC().Truncate(time.Microsecond)
			seq := 0
			for b.Loop() {
				b.StopTimer()
				sets := make([]insertSet, size)
				claims := make([]ClaimIn, size)
				for i := range sets {
					seq++
					id := fmt.Sprintf("c-%d-%d", size, seq)
					sets[i] = insertSet{rows: []models.Delivery{planned(id, "ev-"+id, "wa", now)}}
					claims[i] = ClaimIn{ID: id, Mode: First, Now: now}
				}
				if _, err := batch.runInsert(ctx, sets); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				out, err := batch.runClaim(ctx, claims)
				if err != nil {
					b.Fatal(err)
				}
				for i, o := range out {
					if !o.ok {
						b.Fatalf("delivery %s was not claimed", claims[i].ID)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/delivery")
		})
	}
}
