package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// BenchmarkPublish measures Publish of an ordinary event (one asynq task in
// Redis) from parallel goroutines sharing one Client, as a service would.
func BenchmarkPublish(b *testing.B) {
	opt, _ := testenv.Redis(b)
	c, err := client.New(client.Config{RedisURL: testenv.RedisURL(opt)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	doc := map[string]any{
		"doctype": "Sales Order", "name": "SO-0000001", "customer": "Acme Corporation", "status": "To Deliver and Bill",
		"grand_total": 1500, "items": []any{map[string]any{"item_code": "WIDGET-1", "qty": 2, "rate": 250}},
	}
	ctx := context.Background()
	b.SetParallelism(4) // 4 × GOMAXPROCS goroutines
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Publish(ctx, client.Event{DocType: "Sales Order", DocName: "SO-0000001", Event: "on_submit", Doc: doc}); err != nil {
				panic(fmt.Sprint(err))
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
