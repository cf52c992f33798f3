package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/tasks"
)

// retriesResult is one run of the retries scenario (issue 27): the same
// worker delivers N fresh events, then N due retries seeded as Failed rows,
// swept by a scheduler at sweeper.interval 1s.
type retriesResult struct {
	N int `json:"n"`
	// FreshPerSecond is N fresh events delivered from a ready queue;
	// the CPU is the worker's and its database backends' per delivery.
	FreshPerSecond     float64 `json:"fresh_per_second"`
	FreshWorkerCPUMS   float64 `json:"fresh_worker_cpu_ms_per_delivery"`
	FreshDatabaseCPUMS float64 `json:"fresh_database_cpu_ms_per_delivery"`
	// DrainPerSecond is the N retries' rate from the first 200 to the
	// last (the first sweep comes up to a tick after the scheduler
	// starts); DrainVsFresh its ratio to FreshPerSecond.
	DrainPerSecond float64 `json:"drain_per_second"`
	DrainVsFresh   float64 `json:"drain_vs_fresh"`
	// OverallPerSecond counts from the scheduler's start.
	OverallPerSecond   float64 `json:"overall_per_second"`
	DrainWorkerCPUMS   float64 `json:"drain_worker_cpu_ms_per_delivery"`
	DrainDatabaseCPUMS float64 `json:"drain_database_cpu_ms_per_delivery"`
	// The Redis figures are the server's own CPU per delivery (INFO cpu)
	// in each half: the drain pays its enqueues (the sweeper runs in the
	// worker), the fresh half's were made before its clock started.
	FreshRedisCPUMS float64 `json:"fresh_redis_cpu_ms_per_delivery"`
	DrainRedisCPUMS float64 `json:"drain_redis_cpu_ms_per_delivery"`
	Duplicates      int     `json:"duplicates"`
}

// runRetries runs the retries scenario once: a worker (concurrency) is
// started, N fresh events are delivered, then N Failed rows, due now, are
// seeded with COPY (each carrying the body its event would have frozen),
// and a scheduler at sweeper.interval 1s starts: the sweeper (in the
// worker) queues their retries and the worker drains them, receiver up.
func (e *env) runRetries(ctx context.Context, n, concurrency int) (retriesResult, error) {
	res := retriesResult{N: n}
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	if err := e.createHooks(ctx, 1, 3); err != nil {
		return res, err
	}
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		return res, err
	}
	defer pub.Close()
	insp := asynq.NewInspector(e.redis)
	defer insp.Close()
	environ := e.homingEnv("HOMING_WORKER_CONCURRENCY="+strconv.Itoa(concurrency), "HOMING_SWEEPER_INTERVAL=1s")
	if err := publishPaused(ctx, pub, insp, n); err != nil {
		return res, err
	}
	worker, err := startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
	if err != nil {
		return res, err
	}
	defer func() { _ = worker.stop() }()
	// Fresh.
	red, err := e.redisNow(ctx)
	if err != nil {
		return res, err
	}
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
	w1, err := cpuTime(worker.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	db1, err := e.backendCPU(ctx)
	if err != nil {
		return res, err
	}
	if res.FreshRedisCPUMS, _, err = red.since(ctx, e, n); err != nil {
		return res, err
	}
	res.FreshWorkerCPUMS, res.FreshDatabaseCPUMS = perDelivery(w1, n), perDelivery(db1, n)

	// Retries: N rows due now, as an outage would have left them.
	var hookID, hookName string
	if err := e.db.WithContext(ctx).Raw("SELECT id, name FROM webhooks").Row().Scan(&hookID, &hookName); err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	if err := seedRetries(ctx, conn, hookID, hookName, e.recv.url+"/h/0", n, n, time.Now().UTC()); err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries"); err != nil {
		return res, err
	}
	w2, err := cpuTime(worker.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	db2, err := e.backendsOf(ctx, workerAppName)
	if err != nil {
		return res, err
	}
	if red, err = e.redisNow(ctx); err != nil {
		return res, err
	}
	done = e.recv.expect(n, 0, false)
	sched, err := startProcess("scheduler", e.binDir, filepath.Join(e.binDir, "scheduler"), nil, environ, "scheduler started")
	if err != nil {
		return res, err
	}
	defer func() { _ = sched.stop() }()
	started := time.Now()
	if err := waitDone(ctx, done, 10*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return res, err
	}
	end := time.Now()
	if err := e.waitDelivered(ctx, 2*n); err != nil {
		return res, err
	}
	w3, err := cpuTime(worker.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	db3, err := e.backendCPUSince(ctx, db2)
	if err != nil {
		return res, err
	}
	if res.DrainRedisCPUMS, _, err = red.since(ctx, e, n); err != nil {
		return res, err
	}
	first := e.recv.firstSuccess()
	res.DrainPerSecond = float64(n) / end.Sub(first).Seconds()
	res.OverallPerSecond = float64(n) / end.Sub(started).Seconds()
	res.DrainVsFresh = res.DrainPerSecond / res.FreshPerSecond
	res.DrainWorkerCPUMS, res.DrainDatabaseCPUMS = perDelivery(w3-w2, n), perDelivery(db3, n)
	res.Duplicates = e.recv.counts().Duplicates
	return res, nil
}

// seedRetries COPYs n Failed rows of one webhook (one attempt made, as a
// failed first attempt leaves them), the first due of them due now, the
// rest an hour on; each with the body event offset+i's first attempt
// would have frozen (benchDoc, rendered by delivery.Build), to url.
func seedRetries(ctx context.Context, conn *pgx.Conn, hookID, hookName, url string, n, due int, now time.Time) error {
	i := 0
	var failed error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		body, _, err := delivery.Build(delivery.Spec{}, benchDoc(n+i))
		if err != nil {
			failed = err
			return nil, err
		}
		next := now.Add(-time.Duration(due-i) * time.Millisecond)
		if i >= due {
			next = now.Add(time.Hour)
		}
		i++
		return []any{
			uuid.Must(uuid.NewV7()).String(), hookID, hookName, fmt.Sprintf("ev-retry-%d", i), "Sales Order",
			fmt.Sprintf("SO-%07d", n+i), "on_submit", "POST", url, `{"Content-Type":"application/json"}`,
			body, "Failed", 1, 3, next, "receiver answered 503 Service Unavailable", now, now,
		}, nil
	})
	_, err := conn.CopyFrom(ctx, pgx.Identifier{"deliveries"}, []string{
		"id", "webhook_id", "webhook_name", "event_id", "doc_type", "doc_name", "doc_event", "method", "url", "headers",
		"payload", "status", "attempts", "max_retries", "next_retry", "last_error", "created_at", "updated_at",
	}, src)
	if err != nil {
		return fmt.Errorf("copy %d rows: %w (%v)", n, err, failed)
	}
	return nil
}
