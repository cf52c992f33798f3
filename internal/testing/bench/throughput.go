package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// throughputCase is one Homing throughput scenario.
type throughputCase struct {
	name   string
	events int
	hooks  int
	// failEvery makes the receiver answer 500 to every failEvery-th request
	// (5: 20 % of requests); 0 never fails.
	failEvery int
	// tenants, above 1, seeds that many tenants of hooks webhooks each and
	// spreads the events over them (tenants.go); otherwise every webhook
	// and event is the default tenant's.
	tenants int
	// docs, when set, spreads the events over that many documents (event
	// i is a version of document i % docs); otherwise each event is a
	// document of its own.
	docs int
	// ordered makes every webhook ordered by document (ordering
	// "document"), with a scheduler running for the sweep's safety net.
	ordered bool
}

// runResult is one run of a throughput scenario.
type runResult struct {
	Deliveries int     `json:"deliveries"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// WorkerCPUMS and DatabaseCPUMS are the CPU milliseconds per delivery
	// of the worker process and of its PostgreSQL backends: unlike the
	// rates, they hardly move when other processes compete for the cores.
	WorkerCPUMS   float64 `json:"worker_cpu_ms_per_delivery,omitempty"`
	DatabaseCPUMS float64 `json:"database_cpu_ms_per_delivery,omitempty"`
	// RedisCPUMS is the Redis server's CPU per delivery (INFO cpu), from
	// the unpause to the last delivery: the publishes came before it.
	RedisCPUMS float64 `json:"redis_cpu_ms_per_delivery,omitempty"`
	// RedisCalls is the commands Redis ran per delivery over the same
	// span, most first (INFO commandstats; a script's own calls count).
	RedisCalls string `json:"redis_calls_per_delivery,omitempty"`
	Failed     int    `json:"receiver_failed,omitempty"`
	Duplicates int    `json:"duplicates"`
}

// benchDoc is the document of event i: a small Sales Order, about 400 bytes
// of JSON, sent whole (webhooks without a template send the document).
func benchDoc(i int) map[string]any {
	return map[string]any{
		"doctype": "Sales Order", "name": fmt.Sprintf("SO-%07d", i), "customer": "Acme Corporation",
		"status": "To Deliver and Bill", "currency": "EUR", "grand_total": 1500 + i, "posting_date": "2025-01-15",
		"items": []any{
			map[string]any{"item_code": "WIDGET-1", "qty": 2, "rate": 250, "amount": 500},
			map[string]any{"item_code": "GADGET-7", "qty": 1, "rate": 1000, "amount": 1000},
		},
		"owner": "sales@example.com", "company": "Example Ltd",
	}
}

// createHooks makes n webhooks on Sales Order on_submit pointing at the
// receiver (one path each).
func (e *env) createHooks(ctx context.Context, n, maxRetries int) error {
	return e.createHooksIn(ctx, "", n, maxRetries)
}

// createHooksIn is createHooks in tenant ("" is the default one).
func (e *env) createHooksIn(ctx context.Context, tenant string, n, maxRetries int) error {
	svc := webhook.New(e.db, &secretbox.Box{}, nil, webhook.Defaults{MaxRetries: maxRetries, Timeout: 5 * time.Second}, nil)
	for i := range n {
		name := "bench-" + strconv.Itoa(i)
		url := e.recv.url + "/h/" + strconv.Itoa(i)
		ds, ev := "Sales Order", "on_submit"
		if _, err := svc.Create(ctx, tenant, webhook.Input{Name: &name, DocType: &ds, Event: &ev, URL: &url, MaxRetries: &maxRetries}); err != nil {
			return fmt.Errorf("create webhook: %w", err)
		}
	}
	return nil
}

// publishAll publishes events 0..n-1 from workers goroutines.
func publishAll(ctx context.Context, c *client.Client, n, workers int, doc func(int) map[string]any) error {
	return publishEach(ctx, c, n, workers, func(i int) client.Event {
		return client.Event{DocType: "Sales Order", DocName: fmt.Sprintf("SO-%07d", i), Event: "on_submit", Doc: doc(i)}
	})
}

// publishEach publishes event(0)..event(n-1) from workers goroutines.
func publishEach(ctx context.Context, c *client.Client, n, workers int, event func(int) client.Event) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if _, err := c.Publish(ctx, event(i)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// runHoming runs one throughput scenario once: events are queued while the
// default queue is paused, the worker (a real process) is started, and the
// clock runs from unpausing until the database shows every delivery
// Delivered.
func (e *env) runHoming(ctx context.Context, tc throughputCase, concurrency int) (runResult, error) {
	err := e.reset(ctx)
	if err != nil {
		return runResult{}, err
	}
	maxRetries := 3
	if tc.failEvery > 0 {
		maxRetries = 20
	}
	if tc.tenants > 1 {
		err = e.seedTenants(ctx, tc.tenants, tc.hooks, maxRetries)
	} else {
		err = e.createHooks(ctx, tc.hooks, maxRetries)
	}
	if err != nil {
		return runResult{}, err
	}
	if tc.ordered {
		if err := e.db.WithContext(ctx).Exec("UPDATE webhooks SET ordering = ?", models.OrderingDocument).Error; err != nil {
			return runResult{}, fmt.Errorf("order webhooks: %w", err)
		}
	}
	insp := asynq.NewInspector(e.redis)
	defer insp.Close()
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		return runResult{}, err
	}
	defer pub.Close()
	// An empty queue cannot be paused before it exists; publishing creates it.
	if err := publishEach(ctx, pub, 1, 1, tc.event); err != nil {
		return runResult{}, err
	}
	if err := insp.PauseQueue(tasks.DefaultQueue); err != nil {
		return runResult{}, fmt.Errorf("pause queue: %w", err)
	}
	if err := publishEach(ctx, pub, tc.events-1, 8, func(i int) client.Event { return tc.event(i + 1) }); err != nil {
		return runResult{}, err
	}
	extra := []string{"HOMING_WORKER_CONCURRENCY=" + strconv.Itoa(concurrency)}
	if tc.failEvery > 0 {
		extra = append(extra, "HOMING_RETRY_SCHEDULE=100ms", "HOMING_SWEEPER_INTERVAL=1s")
	}
	environ := e.homingEnv(extra...)
	var worker *process
	if e.cpuProfile != "" {
		// Profiling: the worker runs in this process (no RSS of its own).
		stop, err := startInProcessWorker(ctx, environ, e.cpuProfile)
		if err != nil {
			return runResult{}, err
		}
		defer stop()
	} else {
		worker, err = startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
		if err != nil {
			return runResult{}, err
		}
		defer func() { _ = worker.stop() }()
	}
	if tc.failEvery > 0 || tc.ordered {
		sched, err := startProcess("scheduler", e.binDir, filepath.Join(e.binDir, "scheduler"), nil, environ, "scheduler started")
		if err != nil {
			return runResult{}, err
		}
		defer func() { _ = sched.stop() }()
	}
	target := tc.events * tc.hooks
	red, err := e.redisNow(ctx)
	if err != nil {
		return runResult{}, err
	}
	done := e.recv.expect(target, tc.failEvery, false)
	start := time.Now()
	if err := insp.UnpauseQueue(tasks.DefaultQueue); err != nil {
		return runResult{}, fmt.Errorf("unpause queue: %w", err)
	}
	if err := waitDone(ctx, done, 15*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return runResult{}, err
	}
	if err := e.waitDelivered(ctx, target); err != nil {
		return runResult{}, err
	}
	elapsed := time.Since(start)
	redisMS, redisCalls, err := red.since(ctx, e, target)
	if err != nil {
		return runResult{}, err
	}
	c := e.recv.counts()
	res := runResult{
		Deliveries: target, Seconds: elapsed.Seconds(), PerSecond: float64(target) / elapsed.Seconds(),
		Failed: c.Failed, Duplicates: c.Duplicates, RedisCPUMS: redisMS, RedisCalls: redisCalls,
	}
	if worker != nil {
		rss, err := worker.peakRSS()
		if err != nil {
			return runResult{}, err
		}
		res.PeakRSSMiB = float64(rss) / (1 << 20)
		// Publishing happened before the worker started: all of its CPU
		// went to these deliveries (and its start-up).
		cpu, err := cpuTime(worker.cmd.Process.Pid)
		if err != nil {
			return runResult{}, err
		}
		res.WorkerCPUMS = perDelivery(cpu, target)
		db, err := e.backendCPU(ctx)
		if err != nil {
			return runResult{}, err
		}
		res.DatabaseCPUMS = perDelivery(db, target)
	}
	return res, nil
}

// waitDelivered polls until n deliveries are Delivered.
func (e *env) waitDelivered(ctx context.Context, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var got int64
		if err := e.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ?", models.StatusDelivered).Count(&got).Error; err != nil {
			return err
		}
		if int(got) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d deliveries Delivered after the receiver got them all", got, n)
		}
		time.Sleep(5 * time.Millisecond) // polling the database with a deadline
	}
}

func waitDone(ctx context.Context, done <-chan struct{}, limit time.Duration, status func() string) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(limit):
		return fmt.Errorf("not done within %s: %s", limit, status())
	}
}

// baselineTask is the bare asynq task type of the baseline worker.
const baselineTask = "bench:post"

// runBaseline runs the bare asynq worker once: the same N bodies queued the
// same way, the same concurrency and receiver, no database.
func (e *env) runBaseline(ctx context.Context, n, concurrency int, self string) (runResult, error) {
	if err := e.reset(ctx); err != nil {
		return runResult{}, err
	}
	ac := asynq.NewClient(e.redis)
	defer ac.Close()
	insp := asynq.NewInspector(e.redis)
	defer insp.Close()
	enqueue := func(i int) error {
		body, _, err := delivery.Build(delivery.Spec{}, benchDoc(i))
		if err != nil {
			return err
		}
		_, err = ac.EnqueueContext(ctx, asynq.NewTask(baselineTask, body, asynq.Queue(tasks.DefaultQueue)))
		return err
	}
	if err := enqueue(0); err != nil {
		return runResult{}, err
	}
	if err := insp.PauseQueue(tasks.DefaultQueue); err != nil {
		return runResult{}, err
	}
	for i := 1; i < n; i++ {
		if err := enqueue(i); err != nil {
			return runResult{}, err
		}
	}
	args := []string{"-role", "baseline", "-concurrency", strconv.Itoa(concurrency), "-redis-url", e.redisURL, "-target", e.recv.url + "/h/0"}
	w, err := startProcess("baseline", e.binDir, self, args, e.homingEnv(), "baseline started")
	if err != nil {
		return runResult{}, err
	}
	defer func() { _ = w.stop() }()
	red, err := e.redisNow(ctx)
	if err != nil {
		return runResult{}, err
	}
	done := e.recv.expect(n, 0, false)
	start := time.Now()
	if err := insp.UnpauseQueue(tasks.DefaultQueue); err != nil {
		return runResult{}, err
	}
	if err := waitDone(ctx, done, 15*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return runResult{}, err
	}
	elapsed := time.Since(start)
	redisMS, redisCalls, err := red.since(ctx, e, n)
	if err != nil {
		return runResult{}, err
	}
	rss, err := w.peakRSS()
	if err != nil {
		return runResult{}, err
	}
	cpu, err := cpuTime(w.cmd.Process.Pid)
	if err != nil {
		return runResult{}, err
	}
	return runResult{
		Deliveries: n, Seconds: elapsed.Seconds(), PerSecond: float64(n) / elapsed.Seconds(),
		PeakRSSMiB: float64(rss) / (1 << 20), WorkerCPUMS: perDelivery(cpu, n), RedisCPUMS: redisMS,
		RedisCalls: redisCalls, Duplicates: e.recv.counts().Duplicates,
	}, nil
}

func perDelivery(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}
