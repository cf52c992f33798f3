package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Service is a long-running part of a Homing process: the worker, the
// scheduler, an outbox relay, an HTTP server. Start returns once the part
// runs (or with the reason it cannot, such as a port in use); Stop returns
// once it has stopped, within ctx where the part can be hurried.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Runner is the one place a process's services are started and stopped:
// in the order they were added, and stopped in the reverse order, so a part
// stops only after every part that depends on it (homing serve's HTTP
// server stops before the relay that queues what its requests published).
// homing worker, scheduler, serve and dev are each a Runner with their own
// list.
type Runner struct {
	// Log receives one line per part that fails to stop.
	Log *slog.Logger
	// StopTimeout bounds the stop of all parts together.
	StopTimeout time.Duration
	// Stopping, when set, is called once ctx ends, before the first Stop
	// (a command un-registers its signal handler there, so that a second
	// signal ends the process at once).
	Stopping func()

	parts []part
}

type part struct {
	name string
	svc  Service
}

// Add appends a part; name appears in errors and logs.
func (r *Runner) Add(name string, s Service) {
	r.parts = append(r.parts, part{name: name, svc: s})
}

// Run starts every part in order, calls ready (when set) once all run,
// waits for ctx to end and stops them in reverse order. When a part cannot
// start, the parts already started are stopped and its error is returned.
// Stop errors are logged and returned together.
func (r *Runner) Run(ctx context.Context, ready func()) error {
	for i, p := range r.parts {
		if err := p.svc.Start(ctx); err != nil {
			stopErr := r.stop(r.parts[:i])
			return errors.Join(&StartError{Part: p.name, Err: err}, stopErr)
		}
	}
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	if r.Stopping != nil {
		r.Stopping()
	}
	return r.stop(r.parts)
}

// StopGrace is how long a part reached after StopTimeout is spent (an
// earlier part took all of it) still has to stop: told to stop, a part
// whose work waits on a database that is gone has its calls cancelled and
// returns in milliseconds, and is not reported as failing to stop because
// the part before it used the budget.
const StopGrace = 2 * time.Second

// stop stops parts in reverse order within StopTimeout, each part reached
// after it with StopGrace of its own.
func (r *Runner) stop(parts []part) error {
	timeout := r.StopTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		pctx := ctx
		if ctx.Err() != nil {
			var cancelGrace context.CancelFunc
			pctx, cancelGrace = context.WithTimeout(context.Background(), StopGrace)
			defer cancelGrace()
		}
		if err := parts[i].svc.Stop(pctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", parts[i].name, err))
			if r.Log != nil {
				r.Log.Warn("stop failed", "part", parts[i].name, "error", err.Error())
			}
		}
	}
	return errors.Join(errs...)
}

// StartError is a part that could not start.
type StartError struct {
	Part string
	Err  error
}

func (e *StartError) Error() string { return fmt.Sprintf("start %s: %v", e.Part, e.Err) }

// Unwrap gives the part's own error.
func (e *StartError) Unwrap() error { return e.Err }

// ServiceFuncs makes a Service of two functions, for a part with no type of
// its own (closing a client when the process stops).
type ServiceFuncs struct {
	StartFunc func(ctx context.Context) error
	StopFunc  func(ctx context.Context) error
}

// Start calls StartFunc, when set.
func (f ServiceFuncs) Start(ctx context.Context) error {
	if f.StartFunc == nil {
		return nil
	}
	return f.StartFunc(ctx)
}

// Stop calls StopFunc, when set.
func (f ServiceFuncs) Stop(ctx context.Context) error {
	if f.StopFunc == nil {
		return nil
	}
	return f.StopFunc(ctx)
}
