// Package worker runs an asynq server with Homing's handlers: fan-out, first
// attempts, retries and sweeps.
package worker

import (
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/logging"
	"github.com/homingdev/homing/retention"
	"github.com/homingdev/homing/sweeper"
	"github.com/homingdev/homing/tasks"
)

// taskCheckInterval is how long an idle worker waits before polling its
// queues again; asynq's 1 s default would add up to a second of latency.
const taskCheckInterval = 50 * time.Millisecond

// Worker processes Homing's tasks until stopped.
type Worker struct {
	server    *asynq.Server
	client    *asynq.Client
	inspector *asynq.Inspector
	mux       *asynq.ServeMux
	Sweeper   *sweeper.Sweeper
}

// New builds a worker on a's dependencies.
func New(a *app.App) *Worker {
	cfg := a.Config
	client := asynq.NewClient(a.Redis)
	inspector := asynq.NewInspector(a.Redis)
	sw := sweeper.New(a.DB, client, inspector, sweeper.Config{
		BatchSize: cfg.Sweeper.BatchSize,
		Clock:     a.Clock,
		Logger:    a.Log,
		NewTask:   tasks.NewRetryTask,
		TaskID:    tasks.RetryTaskID,
	})
	ret := retention.New(a.DB, retention.Config{
		Delivered: cfg.Retention.Delivered, Exhausted: cfg.Retention.Exhausted, Clock: a.Clock, Logger: a.Log,
	})
	h := &tasks.Handlers{Dispatcher: a.Dispatcher, Sweeper: sw, Retention: ret, Client: client, Logger: a.Log}
	mux := asynq.NewServeMux()
	h.Register(mux)
	queues := cfg.Worker.Queues
	if len(queues) == 0 {
		queues = map[string]int{tasks.DefaultQueue: 1}
	}
	srv := asynq.NewServer(a.Redis, asynq.Config{
		Concurrency:       cfg.Worker.Concurrency,
		Queues:            queues,
		ShutdownTimeout:   cfg.Worker.ShutdownTimeout,
		TaskCheckInterval: taskCheckInterval,
		Logger:            logging.Asynq(a.Log),
		LogLevel:          asynq.WarnLevel,
		RetryDelayFunc:    infraRetryDelay,
	})
	return &Worker{server: srv, client: client, inspector: inspector, mux: mux, Sweeper: sw}
}

// infraRetryDelay paces asynq's re-runs of tasks that failed for
// infrastructure reasons (database down): 1 s, 2 s, 4 s … capped at one
// minute, so work resumes soon after the database returns.
func infraRetryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	return min(time.Duration(1<<min(n, 6))*time.Second, time.Minute)
}

// Start begins processing in the background.
func (w *Worker) Start() error {
	if err := w.server.Start(w.mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	return nil
}

// Stop stops fetching new tasks, waits up to worker.shutdown_timeout for
// in-flight ones, and puts the rest back in their queues.
func (w *Worker) Stop() {
	w.server.Shutdown()
	_ = w.client.Close()
	_ = w.inspector.Close()
}
