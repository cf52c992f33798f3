// Package metrics exposes what an operator asks of a running worker — is
// delivery keeping up, and are receivers answering — as Prometheus metrics,
// next to asynq's own queue metrics, with /healthz and /readyz beside them.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/models"
)

// The dispatcher and the sweeper report to Metrics.
var (
	_ dispatch.Observer        = (*Metrics)(nil)
	_ dispatch.LatencyObserver = (*Metrics)(nil)
	_ sweeper.Observer         = (*Metrics)(nil)
)

// backlogTimeout bounds the database query a scrape makes, so a slow
// database shows up as missing backlog gauges rather than a hung scrape.
const backlogTimeout = 5 * time.Second

// Options says where the metrics read at scrape time come from. Every field
// is optional.
type Options struct {
	// Backlog reports how many Failed deliveries are due and the oldest
	// one's next_retry (zero when none): sweeper.Sweeper.Backlog. Nil leaves
	// out homing_due_backlog and homing_oldest_due_age_seconds.
	Backlog func(ctx context.Context) (count int64, oldest time.Time, err error)
	// Now is the clock the oldest due delivery's age is measured with, the
	// one its next_retry was computed with; nil is the wall clock.
	Now func() time.Time
	// ScrapeCache is metrics.scrape_cache: how long the metrics server's
	// /metrics answers scrapes from one collection (CachedHandler); 0
	// collects for every scrape, still one at a time.
	ScrapeCache time.Duration
	// ScrapeNow is the clock ScrapeCache is measured with: transport
	// time, the wall clock when nil (Now is the deliveries' clock, which
	// tests stop).
	ScrapeNow func() time.Time
	// Inspector reads asynq's queues for the asynq_* metrics; nil leaves
	// them out.
	Inspector *asynq.Inspector
	// Logger receives errors met while gathering a scrape.
	Logger *slog.Logger
	// MaxWebhookLabels is metrics.max_webhook_labels: the first this many
	// webhooks seen get their own webhook label, later ones count as
	// "other". 0 counts every webhook as "other".
	MaxWebhookLabels int
	// MaxTenantLabels is metrics.max_tenant_labels, the same bound for the
	// tenant label.
	MaxTenantLabels int
	// MaxWebhookLabelsPerTenant is metrics.max_webhook_labels_per_tenant:
	// how many of MaxWebhookLabels one tenant other than the default may
	// take (0: no cap of its own).
	MaxWebhookLabelsPerTenant int
	// Database is the process's database watcher, read for
	// homing_database_errors_total and homing_database_up; nil leaves them
	// out.
	Database *dbstate.Watcher
	// Handoff takes the delivery outcomes and attempts that processes
	// without metrics handed off (handoff.Handoff.Drain), to count them in
	// homing_deliveries_total and homing_attempts_total at scrape time; nil
	// counts only this process's own.
	Handoff func(ctx context.Context) ([]handoff.Count, error)
}

// Metrics holds Homing's metrics in a registry of its own, so that two
// workers in one process (tests, dev mode) never collide on a global one.
// It is safe for concurrent use.
type Metrics struct {
	reg             *prometheus.Registry
	log             *slog.Logger
	scrapeCache     time.Duration    // Options.ScrapeCache
	scrapeNow       func() time.Time // Options.ScrapeNow
	deliveries      *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	attemptDuration prometheus.Histogram
	sweepDuration   prometheus.Histogram
	sweepEnqueued   prometheus.Counter
	postponed       *prometheus.CounterVec
	taskFailures    *prometheus.CounterVec // taskfailure.go
	// latency and firstAttempt are the latency users feel (Latency).
	latency      *prometheus.HistogramVec
	firstAttempt *prometheus.HistogramVec
	bound        *handoff.Labels
}

// LatencyBuckets are the buckets of the latency users feel: from tens of
// milliseconds (a healthy receiver) to a day (a delivery that waited out
// the retry schedule).
var LatencyBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 7200, 18000, 36000, 86400}

// New builds the metrics and registers them, with the Go runtime and
// process collectors, on a new registry.
func New(opts Options) *Metrics {
	if opts.Now == nil {
		opts.Now = clock.Real{}.Now
	}
	if opts.ScrapeNow == nil {
		opts.ScrapeNow = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg:         prometheus.NewRegistry(),
		log:         opts.Logger,
		scrapeCache: opts.ScrapeCache,
		scrapeNow:   opts.ScrapeNow,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "homing_deliveries_total",
			Help: "Deliveries moved to a status, by why (reason): Delivered and Exhausted are final, Failed means a retry is scheduled. Every outcome is counted once, whichever process caused it: those of processes without metrics (serve, the command line) are handed off through Redis and counted by the next worker scraped.",
		}, []string{"tenant", "webhook", "status", "reason"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "homing_attempts_total",
			Help: "Delivery attempts by outcome class: 2xx, 3xx, 4xx, 5xx, timeout, connection, invalid (no request could be built), canceled. Counted once, whichever process made the attempt: those of processes without metrics (serve's workflow_transition) are handed off through Redis and counted by the next worker scraped.",
		}, []string{"tenant", "webhook", "class"}),
		attemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "homing_attempt_duration_seconds",
			Help:    "Time from sending a delivery request to reading the receiver's answer, or giving up.",
			Buckets: handoff.DurationBuckets,
		}),
		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "homing_sweep_duration_seconds",
			Help:    "Time one sweeper tick took to select due deliveries and enqueue their retries.",
			Buckets: prometheus.DefBuckets,
		}),
		sweepEnqueued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "homing_sweep_enqueued_total",
			Help: "Retry tasks the sweeper enqueued.",
		}),
		postponed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "homing_postponed_total",
			Help: "Attempts not made, with no attempt counted: rate_limit (the webhook's rate_limit was spent), held (the webhook is failing and the retry was not its probe), tenant_disabled (the delivery's tenant is disabled: it is kept, and sent once the tenant is enabled again), tenant_share (the delivery's tenant had its share of the worker's requests in flight, worker.tenant_share: it is sent as they end).",
		}, []string{"reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "homing_delivery_latency_seconds",
			Help:    "Time from an event's acceptance (its 202, PublishTx's commit, Publish's enqueue) to its delivery's final outcome: outcome delivered or exhausted, retried true when it took more than one attempt. Outcomes of processes without metrics (serve's workflow_transition) are not in it.",
			Buckets: LatencyBuckets,
		}, []string{"tenant", "webhook", "outcome", "retried"}),
		firstAttempt: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "homing_delivery_first_attempt_seconds",
			Help:    "Time from an event's acceptance to the first attempt of each of its deliveries (its request sent, or given up).",
			Buckets: LatencyBuckets,
		}, []string{"tenant", "webhook"}),
	}
	for _, r := range []string{"rate_limit", "held", "tenant_disabled", "tenant_share"} {
		m.postponed.WithLabelValues(r)
	}
	// Every label value starts at zero, so rate() and alerts see a series
	// before its first event.
	m.bound = handoff.NewLabels(opts.MaxTenantLabels, opts.MaxWebhookLabels, opts.MaxWebhookLabelsPerTenant)
	for status, reasons := range models.Reasons {
		for _, r := range reasons {
			m.deliveries.WithLabelValues(OtherWebhooks, OtherWebhooks, status, r)
		}
	}
	for _, c := range []send.Class{
		send.Class2xx, send.Class3xx, send.Class4xx, send.Class5xx,
		send.ClassTimeout, send.ClassConnection, send.ClassInvalid, send.ClassCanceled,
	} {
		m.attempts.WithLabelValues(OtherWebhooks, OtherWebhooks, string(c))
	}
	m.taskFailures = newTaskFailures()
	// The attempts' counters and durations in one collector, in order
	// (drainingCounter), with what other processes handed off when
	// opts.Handoff is set.
	counters := &drainingCounter{deliveries: m.deliveries, attempts: m.attempts, duration: m.attemptDuration, m: m, drain: opts.Handoff}
	m.reg.MustRegister(
		counters, m.sweepDuration, m.sweepEnqueued, m.postponed, m.taskFailures, m.latency, m.firstAttempt,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if opts.Backlog != nil {
		m.reg.MustRegister(newBacklogCollector(opts.Backlog, opts.Now))
	}
	if opts.Database != nil {
		m.reg.MustRegister(newDatabaseCollector(opts.Database))
	}
	if opts.Inspector != nil {
		m.reg.MustRegister(asynqmetrics.NewQueueMetricsCollector(opts.Inspector))
	}
	return m
}

// Attempt counts one attempt and the status it left its delivery in, and
// why (none when status is empty). An invalid attempt sent no request, so
// it has no duration to observe.
//
// The attempt is counted last, so a scrape that sees homing_attempts_total
// at n also sees the duration and status of those n attempts.
func (m *Metrics) Attempt(tenant, webhook, class string, d time.Duration, status, reason string) {
	if class != string(send.ClassInvalid) {
		m.attemptDuration.Observe(d.Seconds())
	}
	if status != "" {
		m.Deliveries(tenant, webhook, status, reason, 1)
	}
	ten, hook := m.labels(tenant, webhook)
	m.attempts.WithLabelValues(ten, hook, class).Inc()
}

// Deliveries counts n deliveries of webhook moved to status for reason
// (models.Reasons). It is the one place homing_deliveries_total moves:
// attempts, and the deliveries made final without one (at fan-out, by
// disabling or deleting their webhook) all come through it.
func (m *Metrics) Deliveries(tenant, webhook, status, reason string, n int) {
	if n <= 0 {
		return
	}
	ten, hook := m.labels(tenant, webhook)
	m.deliveries.WithLabelValues(ten, hook, status, reason).Add(float64(n))
}

// Latency observes one delivery's final outcome (models.StatusDelivered or
// StatusExhausted), d after its event's acceptance, and whether it took
// more than one attempt.
func (m *Metrics) Latency(tenant, webhook, status string, retried bool, d time.Duration) {
	ten, hook := m.labels(tenant, webhook)
	outcome := "exhausted"
	if status == models.StatusDelivered {
		outcome = "delivered"
	}
	m.latency.WithLabelValues(ten, hook, outcome, strconv.FormatBool(retried)).Observe(d.Seconds())
}

// FirstAttempt observes a delivery's first attempt, d after its event's
// acceptance.
func (m *Metrics) FirstAttempt(tenant, webhook string, d time.Duration) {
	ten, hook := m.labels(tenant, webhook)
	m.firstAttempt.WithLabelValues(ten, hook).Observe(d.Seconds())
}

// labels are the tenant and webhook label values of tenant's webhook, each
// bounded (handoff.Labels): a tenant past metrics.max_tenant_labels is
// "other", and so is its webhook; a webhook past metrics.max_webhook_labels,
// or past its tenant's metrics.max_webhook_labels_per_tenant, is "other".
func (m *Metrics) labels(tenant, webhook string) (string, string) {
	return m.bound.Of(tenant, webhook)
}

// Postponed counts an attempt not made, by why.
func (m *Metrics) Postponed(reason string) {
	m.postponed.WithLabelValues(reason).Inc()
}

// Sweep counts one sweeper tick.
func (m *Metrics) Sweep(d time.Duration, enqueued int) {
	m.sweepDuration.Observe(d.Seconds())
	m.sweepEnqueued.Add(float64(enqueued))
}

// Handler serves the registry in Prometheus' exposition format. A collector
// that fails (the database is down) drops its own metrics from the scrape,
// not the others.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      printer{m.log},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// printer adapts slog to promhttp's Println logger.
type printer struct{ log *slog.Logger }

func (p printer) Println(v ...any) {
	p.log.Warn("gather metrics", "error", fmt.Sprint(v...))
}

// backlogCollector reads the due backlog at scrape time: it is a property of
// the database, not of this process, so a counter kept in memory would be
// wrong after a restart or with several workers.
type backlogCollector struct {
	backlog func(ctx context.Context) (int64, time.Time, error)
	now     func() time.Time
	count   *prometheus.Desc
	age     *prometheus.Desc
}

func newBacklogCollector(backlog func(ctx context.Context) (int64, time.Time, error), now func() time.Time) *backlogCollector {
	return &backlogCollector{
		backlog: backlog,
		now:     now,
		count: prometheus.NewDesc("homing_due_backlog",
			"Failed deliveries whose next retry is due now; a sweep should bring this to zero.", nil, nil),
		age: prometheus.NewDesc("homing_oldest_due_age_seconds",
			"How long the oldest due Failed delivery has been waiting past its next retry; 0 when none is due.", nil, nil),
	}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.age
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	count, oldest, err := c.backlog(ctx)
	if err != nil {
		err = fmt.Errorf("read due backlog: %w", err)
		ch <- prometheus.NewInvalidMetric(c.count, err)
		ch <- prometheus.NewInvalidMetric(c.age, err)
		return
	}
	age := 0.0
	if count > 0 && !oldest.IsZero() {
		age = max(c.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(count))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
}
