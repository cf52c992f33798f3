// Package worker runs an asynq server with Homing's handlers: fan-out, first
// attempts, retries and sweeps.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/retention"
	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/lib/logging"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/tasks"
)

// Worker processes Homing's tasks until stopped.
type Worker struct {
	server    *asynq.Server
	client    *asynq.Client
	inspector *asynq.Inspector
	mux       *asynq.ServeMux
	Sweeper   *sweeper.Sweeper
	// relay drains the outbox once at start, so events committed while no
	// scheduler ran are not left waiting for one.
	relay *outbox.Relay
	log   *slog.Logger
	// metrics serves metrics.addr; nil when it is empty.
	metrics *metrics.Server
	stacks  *warmStacks
	// concurrency is worker.concurrency: how many warm goroutines to start.
	concurrency int
}

// New builds a worker on a's dependencies.
func New(a *app.App) *Worker {
	cfg := a.Config
	client := asynq.NewClient(a.Redis)
	inspector := asynq.NewInspector(a.Redis)
	var sw *sweeper.Sweeper
	var (
		metricsSrv *metrics.Server
		sweepObs   sweeper.Observer // an interface, so no typed nil
		failures   failureCounter   // likewise
	)
	if cfg.Metrics.Addr != "" {
		m := metrics.New(metrics.Options{
			Backlog:   func(ctx context.Context) (int64, time.Time, error) { return sw.Backlog(ctx) },
			Now:       a.Clock.Now,
			Inspector: inspector,
			Logger:    a.Log,

			MaxWebhookLabels:          cfg.Metrics.MaxWebhookLabels,
			MaxTenantLabels:           cfg.Metrics.MaxTenantLabels,
			MaxWebhookLabelsPerTenant: cfg.Metrics.MaxWebhookLabelsPerTenant,
			ScrapeCache:               cfg.Metrics.ScrapeCache,
			Database:                  a.Database,
			// What serve, the command line and workers without metrics
			// made final, counted here at the next scrape.
			Handoff: a.Handoff.Drain,
		})
		a.Dispatcher.SetObserver(m)
		sweepObs = m
		failures = m
		metricsSrv = metrics.NewServerWarning(cfg.Metrics.Addr, m, metrics.ReadyWith(a.Database.Ready, a.Redis), readyWarnings(a), a.Log)
	}
	sw = sweeper.New(a.DB, client, inspector, sweeper.Config{
		BatchSize:     cfg.Sweeper.BatchSize,
		MaxPending:    cfg.PendingMark(),
		Interval:      cfg.Sweeper.Interval,
		ProbeInterval: cfg.Health.ProbeInterval,
		Clock:         a.Clock,
		Logger:        a.Log,
		NewTask:       tasks.NewSweptRetryTask,
		TaskID:        tasks.RetryTaskID,
		Observer:      sweepObs,
		Ops:           a.Ops,
	})
	ret := retention.New(a.DB, retention.Config{
		Delivered: cfg.Retention.Delivered, Exhausted: cfg.Retention.Exhausted, Pause: pauseOrNone(cfg.Retention.Pause),
		Clock: a.Clock, Logger: a.Log,
	})
	h := &tasks.Handlers{Dispatcher: a.Dispatcher, Sweeper: sw, Retention: ret, Client: client, Logger: a.Log,
		Intake:    outbox.NewCompleter(a.DB),
		Published: tenant.NewPublished(a.DB, a.Clock.Now),
		RollUp:    func(ctx context.Context) (int, error) { return inspect.RollUp(ctx, a.DB, a.Clock.Now()) }}
	mux := asynq.NewServeMux()
	stacks := newWarmStacks()
	mux.Use(stacks.middleware)
	h.Register(mux)
	queues := withSystemQueue(cfg.Worker.Queues)
	srv := asynq.NewServer(a.Redis, asynq.Config{
		Concurrency:     cfg.Worker.Concurrency,
		Queues:          queues,
		ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		// asynq's 1 s default would add up to a second of latency to an
		// event arriving at an idle worker (it sleeps half to one and a
		// half intervals after finding every queue empty).
		TaskCheckInterval: cfg.Worker.TaskCheckInterval,
		Logger:            logging.Asynq(a.Log),
		LogLevel:          asynq.WarnLevel,
		RetryDelayFunc:    infraRetryDelay,
		ErrorHandler:      failureHandler(cmp.Or(a.Log, slog.New(slog.DiscardHandler)), failures, a.Database),
		// Retries a sweep spreads over its tick for a webhook's rate_limit
		// wait in asynq's scheduled set; moving them to their queue each
		// second (not asynq's 5) keeps them to their second.
		DelayedTaskCheckInterval: time.Second,
	})
	return &Worker{
		server: srv, client: client, inspector: inspector, mux: mux, Sweeper: sw, metrics: metricsSrv,
		relay: a.Relay(client, inspector), log: cmp.Or(a.Log, slog.New(slog.DiscardHandler)),
		stacks: stacks, concurrency: cfg.Worker.Concurrency,
	}
}

// infraRetryDelay paces asynq's re-runs of tasks that failed for
// infrastructure reasons (database down): 1 s, 2 s, 4 s … capped at one
// minute, so work resumes soon after the database returns.
func infraRetryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	return min(time.Duration(1<<min(n, 6))*time.Second, time.Minute)
}

// outboxDrainTimeout bounds the outbox drain at start: a worker must come up
// even when the drain cannot finish; the scheduler's relay continues it.
const outboxDrainTimeout = 30 * time.Second

// Start serves metrics (when metrics.addr is set), begins processing in the
// background, and drains the outbox once (within ctx, and at most
// outboxDrainTimeout: a worker must come up even when the drain cannot
// finish).
func (w *Worker) Start(ctx context.Context) error {
	if w.metrics != nil {
		if err := w.metrics.Start(ctx); err != nil {
			return fmt.Errorf("metrics.addr %q: %w (choose a free port, or set metrics.addr to \"\" to disable metrics)", w.metrics.Addr(), err)
		}
	}
	w.stacks.start(w.concurrency)
	if err := w.server.Start(w.mux); err != nil {
		w.stacks.stop()
		w.stopMetrics()
		return fmt.Errorf("start worker: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outboxDrainTimeout)
	defer cancel()
	if n, err := w.relay.Drain(ctx); err != nil {
		w.log.Warn("outbox drain at start failed; the scheduler's relay will move the rest", "relayed", n, "error", err.Error())
	} else if n > 0 {
		w.log.Info("outbox drained at start", "relayed", n)
	}
	// Events whose tasks Redis lost long ago (outbox.recover_after) are
	// queued again now, not only at a scheduler's next recovery tick.
	if _, err := w.relay.RecoverAll(ctx); err != nil {
		w.log.Warn("outbox recovery at start failed; the scheduler's relay will retry", "error", err.Error())
	}
	return nil
}

// MetricsAddr is where metrics are served once started ("" when disabled):
// the port chosen for metrics.addr ":0".
func (w *Worker) MetricsAddr() string {
	if w.metrics == nil {
		return ""
	}
	return w.metrics.Addr()
}

// Stop stops fetching new tasks, waits up to worker.shutdown_timeout for
// in-flight ones (asynq's own bound, which ctx cannot shorten), and puts
// the rest back in their queues.
func (w *Worker) Stop(context.Context) error {
	w.server.Shutdown()
	w.stacks.stop()
	w.stopMetrics()
	return errors.Join(w.client.Close(), w.inspector.Close())
}

// stopMetrics stops the metrics server last, so the drain can be watched.
func (w *Worker) stopMetrics() {
	if w.metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.metrics.Stop(ctx)
}

// systemShare is how many times the configured queues' weights are scaled
// against tasks.SystemQueue's: the system queue is tried first on about one
// fetch in systemShare+1.
//
// asynq fetches by trying the queues one Redis call each, in an order drawn
// by weight, until one has a task. The system queue is almost always empty
// (a sweep a second at most), so every fetch that tries it first pays a
// second call: at an equal share that was half of all fetches and about a
// tenth of the throughput. A sweep still never waits behind a backlog: it
// is taken within about ten fetches, milliseconds under load, and no weight
// can help when every slot is busy with a slow request.
const systemShare = 9

// withSystemQueue adds tasks.SystemQueue to the configured queues, with one
// tenth of the fetches' first tries (systemShare); the configured weights
// keep their proportions. A configuration that names the system queue
// itself is taken as it is.
func withSystemQueue(configured map[string]int) map[string]int {
	if len(configured) == 0 {
		configured = map[string]int{tasks.DefaultQueue: 1}
	}
	if _, ok := configured[tasks.SystemQueue]; ok {
		return maps.Clone(configured)
	}
	queues := make(map[string]int, len(configured)+1)
	total := 0
	for q, w := range configured {
		queues[q] = w * systemShare
		total += w
	}
	queues[tasks.SystemQueue] = max(total, 1)
	return queues
}

// pauseOrNone maps retention.pause 0 (no pause) to retention.Config's
// negative "none" (its 0 is the default).
func pauseOrNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
