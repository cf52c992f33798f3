package metrics

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/homingdev/homing/internal/ops/handoff"
)

// drainingCounter is homing_deliveries_total and homing_attempts_total with
// the outcomes and attempts other processes handed off (package handoff)
// added to them as they are collected. One collector holds both, because a
// registry collects its collectors concurrently: attempts drained by the
// deliveries' collector could otherwise miss the scrape that drained them.
//
// Why at scrape time, not on a ticker: the counts land in the registry that
// is being read, on the scrape that reads them, so they show on the next
// scrape of any worker; a worker nobody scrapes takes none, where a ticker
// would count them into a registry no one reads. And there is no loop to
// start and stop.
//
// It also collects homing_attempt_duration_seconds, after the counters:
// Metrics.Attempt observes the duration and counts the outcome before it
// counts the attempt, so collecting the attempts first, then the rest in
// the same goroutine, keeps the promise that a scrape seeing n attempts
// sees their n durations and outcomes (a drain's Redis round trip between
// the collectors of a concurrent gathering broke it).
type drainingCounter struct {
	deliveries, attempts *prometheus.CounterVec
	duration             prometheus.Histogram
	m                    *Metrics
	// drain is nil in a process that takes no handed-off counts.
	drain func(ctx context.Context) ([]handoff.Count, error)

	// handed is the durations other processes handed off, added to
	// duration's own when it is collected (a histogram takes no counts).
	mu     sync.Mutex
	handed handedDurations
}

// handedDurations is the handed-off part of homing_attempt_duration_seconds:
// a count per bucket (not cumulative), keyed by upper bound, and the sum.
type handedDurations struct {
	buckets map[float64]uint64
	count   uint64
	sumUS   int64
}

// Describe describes the counters and the histogram.
func (c *drainingCounter) Describe(ch chan<- *prometheus.Desc) {
	c.deliveries.Describe(ch)
	c.attempts.Describe(ch)
	c.duration.Describe(ch)
}

// Collect drains the handed-off counts into the counters, then collects
// them. A Redis that fails leaves the counts in Redis for the next scrape
// (of this worker or another) and the counters as they were.
func (c *drainingCounter) Collect(ch chan<- prometheus.Metric) {
	if c.drain != nil {
		c.drainCounts()
	}
	c.attempts.Collect(ch)
	c.deliveries.Collect(ch)
	c.collectDuration(ch)
}

// collectDuration collects homing_attempt_duration_seconds: this process's
// observations and the durations handed off to it, as one histogram.
func (c *drainingCounter) collectDuration(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	count, sumUS, handedBuckets := c.handed.count, c.handed.sumUS, maps.Clone(c.handed.buckets)
	c.mu.Unlock()
	if count == 0 {
		c.duration.Collect(ch)
		return
	}
	var own dto.Metric
	if err := c.duration.Write(&own); err != nil {
		c.m.log.Warn("homing_attempt_duration_seconds not collected", "error", err.Error())
		return
	}
	h := own.GetHistogram()
	cumulative := make(map[float64]uint64, len(h.GetBucket()))
	var below uint64 // handed-off durations in the buckets up to this one
	for _, b := range h.GetBucket() {
		below += handedBuckets[b.GetUpperBound()]
		cumulative[b.GetUpperBound()] = b.GetCumulativeCount() + below
	}
	ch <- prometheus.MustNewConstHistogram(c.duration.Desc(), h.GetSampleCount()+count,
		h.GetSampleSum()+float64(sumUS)/1e6, cumulative)
}

// addDurations adds handed-off durations (handoff.Count.IsDuration).
func (c *drainingCounter) addDurations(counts []handoff.Count) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handed.buckets == nil {
		c.handed.buckets = map[float64]uint64{}
	}
	for _, d := range counts {
		switch d.Bucket {
		case handoff.SumField:
			c.handed.sumUS += d.N
		case "+Inf":
			c.handed.count += uint64(d.N)
		default:
			b, err := strconv.ParseFloat(d.Bucket, 64)
			if err != nil || !slices.Contains(handoff.DurationBuckets, b) {
				// Another version's bucket: counted, in the next bucket
				// up that this one has, or +Inf.
				i, _ := slices.BinarySearch(handoff.DurationBuckets, b)
				if err != nil || i == len(handoff.DurationBuckets) {
					c.handed.count += uint64(d.N)
					continue
				}
				b = handoff.DurationBuckets[i]
			}
			c.handed.buckets[b] += uint64(d.N)
			c.handed.count += uint64(d.N)
		}
	}
}

// drainCounts drains the handed-off counts into the counters.
func (c *drainingCounter) drainCounts() {
	ctx, cancel := context.WithTimeout(context.Background(), handoff.Timeout)
	counts, err := c.drain(ctx)
	cancel()
	if err != nil {
		c.m.log.Warn("handed-off delivery outcomes and attempts not read: they wait in Redis for the next scrape",
			"metric", "homing_deliveries_total, homing_attempts_total", "error", err.Error())
	}
	outcomes, attempts := int64(0), int64(0)
	var durations []handoff.Count
	for _, h := range counts {
		if h.IsDuration() {
			durations = append(durations, h)
			continue
		}
		if h.IsAttempt() {
			ten, hook := c.m.labels(h.Tenant, h.Webhook)
			c.attempts.WithLabelValues(ten, hook, h.Class).Add(float64(h.N))
			attempts += h.N
			continue
		}
		c.m.Deliveries(h.Tenant, h.Webhook, h.Status, h.Reason, int(h.N))
		outcomes += h.N
	}
	c.addDurations(durations)
	if outcomes+attempts > 0 {
		c.m.log.Debug("handed-off delivery outcomes and attempts counted", "outcomes", outcomes, "attempts", attempts, "series", len(counts))
	}
}

var _ prometheus.Collector = (*drainingCounter)(nil)
