package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/models"
)

// BenchmarkBatchedWrites measures the hot path's two writes per delivery on
// PostgreSQL (the fan-out INSERT and the outcome statement) at several
// batch sizes: ns/op is per delivery, so it shows what sharing a statement
// saves.
func BenchmarkBatchedWrites(b *testing.B) {
	db, batch := batchedFor(b)
	insertWebhook(b, db, "wa", "Sales Order", "on_submit", true)
	ctx := context.Background()
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			now := time.Now().UTC().Truncate(time.Microsecond)
			code := 200
			seq := 0
			for b.Loop() {
				b.StopTimer()
				sets := make([]insertSet, size)
				recs := make([]Outcome, size)
				for i := range sets {
					seq++
					id := fmt.Sprintf("d-%d-%d", size, seq)
					row := planned(id, "ev-"+id, "wa", now)
					row.Attempts = 1
					sets[i] = insertSet{rows: []models.Delivery{row}}
					recs[i] = Outcome{
						Attempt: models.Attempt{DeliveryID: id, Attempt: 1, At: now, Method: "POST", URL: row.URL,
							RequestHeaders: models.StringMap{"Webhook-Id": id}, StatusCode: &code, DurationMS: 1, Class: "2xx", Response: `{"ok":true}`},
						FromStatus: models.StatusFailed, Status: models.StatusDelivered, LastResponse: `{"ok":true}`, UpdatedAt: now,
					}
				}
				b.StartTimer()
				if _, err := batch.runInsert(ctx, sets); err != nil {
					b.Fatal(err)
				}
				if _, err := batch.runRecord(ctx, recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/delivery")
		})
	}
}
