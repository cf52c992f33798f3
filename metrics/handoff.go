package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/homingdev/homing/handoff"
)

// drainingCounter is homing_deliveries_total with the outcomes other
// processes handed off (package handoff) added to it as it is collected.
//
// Why at scrape time, not on a ticker: the counts land in the registry that
// is being read, on the scrape that reads them, so they show on the next
// scrape of any worker; a worker nobody scrapes takes none, where a ticker
// would count them into a registry no one reads. And there is no loop to
// start and stop.
type drainingCounter struct {
	*prometheus.CounterVec
	m     *Metrics
	drain func(ctx context.Context) ([]handoff.Count, error)
}

// Collect drains the handed-off counts into the counter, then collects it.
// A Redis that fails leaves the counts in Redis for the next scrape (of
// this worker or another) and the counter as it was.
func (c *drainingCounter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), handoff.Timeout)
	counts, err := c.drain(ctx)
	cancel()
	if err != nil {
		c.m.log.Warn("handed-off delivery outcomes not read: they wait in Redis for the next scrape",
			"metric", "homing_deliveries_total", "error", err.Error())
	}
	n := int64(0)
	for _, h := range counts {
		c.m.Deliveries(h.Tenant, h.Webhook, h.Status, h.Reason, int(h.N))
		n += h.N
	}
	if n > 0 {
		c.m.log.Debug("handed-off delivery outcomes counted", "outcomes", n, "series", len(counts))
	}
	c.CounterVec.Collect(ch)
}

var _ prometheus.Collector = (*drainingCounter)(nil)
