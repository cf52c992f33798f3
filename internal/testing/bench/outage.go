package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// outageResult is one run of the outage scenario (issue #14): the same
// worker delivers N fresh events, then N events while the receiver answers
// 503, then drains them when it answers again.
type outageResult struct {
	Interval string `json:"sweeper_interval"`
	N        int    `json:"n"`
	// FreshPerSecond is N fresh events delivered from a ready queue.
	FreshPerSecond float64 `json:"fresh_per_second"`
	// DetectSeconds is from the receiver's recovery to its first 200: the
	// probe that finds it back (at most health.probe_interval plus a tick).
	DetectSeconds float64 `json:"detect_seconds"`
	// DrainPerSecond is the backlog's rate from that first 200 to the last
	// delivery; DrainVsFresh its ratio to FreshPerSecond.
	DrainPerSecond float64 `json:"drain_per_second"`
	DrainVsFresh   float64 `json:"drain_vs_fresh"`
	// OverallPerSecond counts from the recovery itself, detection included.
	OverallPerSecond float64 `json:"overall_per_second"`
	Duplicates       int     `json:"duplicates"`
}

// deadResult is the dead-endpoint measurement: requests a minute to an
// endpoint that answers 503 while DueRows retries are due.
type deadResult struct {
	DueRows int `json:"due_rows"`
	// FirstSeconds is how long after the start the steady state is
	// measured from; Burst is what the endpoint got before then.
	Burst         int     `json:"burst_requests"`
	FirstSeconds  float64 `json:"first_seconds"`
	PerMinute     float64 `json:"requests_per_minute"`
	MeasuredForS  float64 `json:"measured_seconds"`
	MaxAttempts   int     `json:"max_attempts_of_a_row"`
	HeldBackAtEnd int64   `json:"held_back_at_end"`
}

// runOutage runs the outage scenario once at sweeper.interval interval.
func (e *env) runOutage(ctx context.Context, n, concurrency int, interval string) (outageResult, error) {
	res := outageResult{Interval: interval, N: n}
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	if err := e.createHooks(ctx, 1, 100); err != nil {
		return res, err
	}
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		return res, err
	}
	defer pub.Close()
	insp := asynq.NewInspector(e.redis)
	defer insp.Close()
	environ := e.homingEnv("HOMING_WORKER_CONCURRENCY="+strconv.Itoa(concurrency), "HOMING_RETRY_SCHEDULE=1s",
		"HOMING_SWEEPER_INTERVAL="+interval)
	// Fresh: N events queued while the queue is paused, then delivered.
	if err := publishPaused(ctx, pub, insp, n); err != nil {
		return res, err
	}
	worker, err := startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
	if err != nil {
		return res, err
	}
	defer func() { _ = worker.stop() }()
	done := e.recv.expect(n, 0, false)
	start := time.Now()
	if err := insp.UnpauseQueue(tasks.DefaultQueue); err != nil {
		return res, err
	}
	if err := waitDone(ctx, done, 10*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return res, err
	}
	if err := e.waitDelivered(ctx, n); err != nil {
		return res, err
	}
	res.FreshPerSecond = float64(n) / time.Since(start).Seconds()

	// Outage: N more events, each failing its first attempt.
	done = e.recv.expect(n, 0, false)
	e.recv.setDown(true)
	if err := publishAll(ctx, pub, n, 8, func(i int) map[string]any { return benchDoc(n + i) }); err != nil {
		return res, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for e.recv.counts().Failed < n {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("outage: only %d of %d first attempts failed", e.recv.counts().Failed, n)
		}
		time.Sleep(10 * time.Millisecond) // polling the receiver's count with a deadline
	}
	sched, err := startProcess("scheduler", e.binDir, filepath.Join(e.binDir, "scheduler"), nil, environ, "scheduler started")
	if err != nil {
		return res, err
	}
	defer func() { _ = sched.stop() }()
	// Recovery.
	e.recv.setDown(false)
	recovered := time.Now()
	if err := waitDone(ctx, done, 10*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return res, err
	}
	end := time.Now()
	if err := e.waitDelivered(ctx, 2*n); err != nil {
		return res, err
	}
	first := e.recv.firstSuccess()
	res.DetectSeconds = first.Sub(recovered).Seconds()
	res.DrainPerSecond = float64(n) / end.Sub(first).Seconds()
	res.OverallPerSecond = float64(n) / end.Sub(recovered).Seconds()
	res.DrainVsFresh = res.DrainPerSecond / res.FreshPerSecond
	res.Duplicates = e.recv.counts().Duplicates
	return res, nil
}

// runDead seeds rows due retries of one webhook whose endpoint answers 503,
// runs a worker and a scheduler at the default configuration, and counts
// the requests the endpoint gets: a burst while the first failures are
// noticed, then one probe every health.probe_interval.
func (e *env) runDead(ctx context.Context, rows, concurrency int, settle, measure time.Duration) (deadResult, error) {
	res := deadResult{DueRows: rows, FirstSeconds: settle.Seconds(), MeasuredForS: measure.Seconds()}
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	if err := e.createHooks(ctx, 1, 100); err != nil {
		return res, err
	}
	var hookID, hookName string
	if err := e.db.WithContext(ctx).Raw("SELECT id, name FROM webhooks").Row().Scan(&hookID, &hookName); err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	if err := seedFailed(ctx, conn, hookID, hookName, 0, rows, rows, time.Now().UTC()); err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, "UPDATE deliveries SET url = $1", e.recv.url+"/h"); err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries"); err != nil {
		return res, err
	}
	e.recv.expect(rows, 0, false)
	e.recv.setDown(true)
	environ := e.homingEnv("HOMING_WORKER_CONCURRENCY=" + strconv.Itoa(concurrency))
	worker, err := startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
	if err != nil {
		return res, err
	}
	defer func() { _ = worker.stop() }()
	sched, err := startProcess("scheduler", e.binDir, filepath.Join(e.binDir, "scheduler"), nil, environ, "scheduler started")
	if err != nil {
		return res, err
	}
	defer func() { _ = sched.stop() }()
	time.Sleep(settle) // a measured window
	res.Burst = e.recv.counts().Failed
	time.Sleep(measure) // a measured window
	res.PerMinute = float64(e.recv.counts().Failed-res.Burst) / measure.Minutes()
	if err := e.db.WithContext(ctx).Raw("SELECT COALESCE(max(attempts), 0) FROM deliveries").Row().Scan(&res.MaxAttempts); err != nil {
		return res, err
	}
	if err := e.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ? AND next_retry <= now()", models.StatusFailed).
		Count(&res.HeldBackAtEnd).Error; err != nil {
		return res, err
	}
	e.recv.setDown(false)
	return res, nil
}

// probeResult is one outage of a given length with the scheduler running
// throughout (issue 27): how long after the receiver is back the first 200
// comes, which only a probe can bring since no new event is published.
type probeResult struct {
	// OutageSeconds is how long the receiver answered 503, from just
	// before the events' first attempts.
	OutageSeconds float64 `json:"outage_seconds"`
	Events        int     `json:"events"`
	// DetectSeconds is from the receiver's recovery to its first 200.
	DetectSeconds float64 `json:"detect_seconds"`
	// OutageRequests is what the endpoint got during the outage beyond
	// each event's first attempt: retries before the webhook turned
	// failing, then the probes.
	OutageRequests int `json:"outage_requests"`
	// DrainSeconds is from the first 200 to the last delivery.
	DrainSeconds float64 `json:"drain_seconds"`
}

// runProbe runs a worker and a scheduler at the default configuration
// (retry.schedule 1s, so that every failed row is due again at once, as
// after any outage longer than the schedule's first gap), takes the
// receiver down, publishes events events, and brings it back outage later.
func (e *env) runProbe(ctx context.Context, events, concurrency int, outage time.Duration) (probeResult, error) {
	res := probeResult{OutageSeconds: outage.Seconds(), Events: events}
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	if err := e.createHooks(ctx, 1, 100); err != nil {
		return res, err
	}
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		return res, err
	}
	defer pub.Close()
	environ := e.homingEnv("HOMING_WORKER_CONCURRENCY="+strconv.Itoa(concurrency), "HOMING_RETRY_SCHEDULE=1s")
	worker, err := startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
	if err != nil {
		return res, err
	}
	defer func() { _ = worker.stop() }()
	sched, err := startProcess("scheduler", e.binDir, filepath.Join(e.binDir, "scheduler"), nil, environ, "scheduler started")
	if err != nil {
		return res, err
	}
	defer func() { _ = sched.stop() }()
	done := e.recv.expect(events, 0, false)
	e.recv.setDown(true)
	down := time.Now()
	if err := publishAll(ctx, pub, events, 8, benchDoc); err != nil {
		return res, err
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(time.Until(down.Add(outage))): // the outage's length
	}
	if failed := e.recv.counts().Failed; failed < events {
		return res, fmt.Errorf("probe: only %d of %d first attempts failed in a %s outage", failed, events, outage)
	}
	res.OutageRequests = e.recv.counts().Failed - events
	e.recv.setDown(false)
	recovered := time.Now()
	if err := waitDone(ctx, done, 5*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return res, err
	}
	end := time.Now()
	first := e.recv.firstSuccess()
	res.DetectSeconds = first.Sub(recovered).Seconds()
	res.DrainSeconds = end.Sub(first).Seconds()
	return res, e.waitDelivered(ctx, events)
}

// publishPaused publishes n fresh events for a worker not yet started: the
// first one alone (so that the default queue exists), then, with the queue
// paused, the other n-1 from 8 goroutines. The caller unpauses it.
func publishPaused(ctx context.Context, pub *client.Client, insp *asynq.Inspector, n int) error {
	if err := publishAll(ctx, pub, 1, 1, benchDoc); err != nil {
		return err
	}
	if err := insp.PauseQueue(tasks.DefaultQueue); err != nil {
		return err
	}
	return publishAll(ctx, pub, n-1, 8, func(i int) map[string]any { return benchDoc(i + 1) })
}
