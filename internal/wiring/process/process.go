// Package process composes Homing's processes from their parts, in one
// place: homing worker, homing scheduler, homing serve and homing dev are
// each an app.Runner with the parts listed here, started in this order and
// stopped in the reverse. A part added to a process is added here, and
// every command that runs that process gets it.
package process

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/lib/httpserve"
	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/worker"
	"github.com/homingdev/homing/tasks"
)

// Worker is homing worker: the asynq server with Homing's handlers (and
// its metrics server), which drains the outbox once at start, and the
// report of what its secrets.key opens, which homing stats reads. The
// report is written before the server is listed in Redis and deleted after
// it left.
func Worker(a *app.App) (*app.Runner, *worker.Worker) {
	w := worker.New(a)
	r := &app.Runner{Log: a.Log, StopTimeout: a.Config.Worker.ShutdownTimeout + stopMargin}
	addWatcher(r, a, "tasks that need it fail and asynq runs them again; the worker's /readyz answers 503")
	r.Add("worker report", preflight.NewReporter(a.Redis, a.DB, a.Box, a.Log))
	r.Add("worker", w)
	return r, w
}

// Scheduler is homing scheduler: an outbox relay, and the periodic
// scheduler that enqueues sweeps and retention.
func Scheduler(a *app.App) (*app.Runner, error) {
	s, err := tasks.NewScheduler(a.Redis, a.Config.Sweeper.Interval, a.Log)
	if err != nil {
		return nil, err
	}
	r := &app.Runner{Log: a.Log, StopTimeout: stopMargin}
	addWatcher(r, a, "the outbox relay tries again every outbox.poll_interval")
	addRelay(r, a, false)
	r.Add("scheduler", s)
	return r, nil
}

// Serve is homing serve: an outbox relay and the HTTP server on api.addr.
// The server stops first, then the relay queues what its last requests
// published (DrainOnStop).
func Serve(a *app.App, handler http.Handler) (*app.Runner, *httpserve.Server) {
	srv := httpserve.New("api", a.Config.API.Addr, handler, a.Log)
	r := &app.Runner{Log: a.Log, StopTimeout: a.Config.Worker.ShutdownTimeout}
	addWatcher(r, a, "API requests that need it, publishes included, are answered 503 database_unavailable with Retry-After, and /readyz 503")
	addRelay(r, a, true)
	r.Add("api", srv)
	return r, srv
}

// Dev is homing dev and homing run (make run): a worker, the scheduler and
// an outbox relay in one process, then extra (the HTTP API and console, the
// monitor UI), on the dev Redis or a real one. One process, so that
// Ctrl-C stops every part and no part outlives another.
func Dev(a *app.App, extra ...Named) (*app.Runner, *worker.Worker, error) {
	r, w := Worker(a)
	a.Database.SetConsequence("tasks that need it fail and are run again, and API requests are answered 503 database_unavailable with Retry-After")
	s, err := tasks.NewScheduler(a.Redis, a.Config.Sweeper.Interval, a.Log)
	if err != nil {
		return nil, nil, err
	}
	r.Add("scheduler", s)
	addRelay(r, a, false)
	for _, e := range extra {
		r.Add(e.Name, e.Service)
	}
	return r, w, nil
}

// Named is a part with its name, for Dev's extras.
type Named struct {
	Name    string
	Service app.Service
	// Banner, when set, is the part's lines in the banner of homing dev
	// and homing run, asked for once it runs (so it can show the port it
	// got).
	Banner func() string
}

// stopMargin is the stop budget of parts that only finish a statement or
// a Redis call.
const stopMargin = 10 * time.Second

// addWatcher adds the database watcher (app.App.Database) first, so it
// probes from the start and stops last; consequence is what this process
// does during an outage, for the ERROR line that starts one.
func addWatcher(r *app.Runner, a *app.App, consequence string) {
	a.Database.SetConsequence(consequence)
	r.Add("database watcher", a.Database)
}

// addRelay adds an outbox relay, the asynq client it queues with and the
// inspector it reads lost tasks' state with; both close after the relay
// stopped.
func addRelay(r *app.Runner, a *app.App, drainOnStop bool) {
	queue := asynq.NewClient(a.Redis)
	insp := asynq.NewInspector(a.Redis)
	r.Add("queue client", app.ServiceFuncs{StopFunc: func(context.Context) error { return errors.Join(queue.Close(), insp.Close()) }})
	if drainOnStop {
		r.Add("outbox relay", a.DrainingRelay(queue, insp))
		return
	}
	r.Add("outbox relay", a.Relay(queue, insp))
}
