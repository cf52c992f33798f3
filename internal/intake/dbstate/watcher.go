package dbstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
)

// DefaultInterval is how often a started Watcher probes the database.
const DefaultInterval = 2 * time.Second

// RetryAfter is what a caller refused for a database outage is told to wait
// (the API's Retry-After): about one probe interval, by when a failover's
// new primary usually answers.
const RetryAfter = 2 * time.Second

// Config is what a Watcher runs on.
type Config struct {
	// Probe checks the database: nil when it answers and takes writes
	// (store.Probe). Required.
	Probe func(ctx context.Context) error
	// Interval is how often Start probes; DefaultInterval when zero.
	Interval time.Duration
	// Consequence ends the ERROR line that an outage starts with: what this
	// process does meanwhile, such as "publishes are answered 503 with
	// Retry-After".
	Consequence string
	Clock       clock.Clock
	Logger      *slog.Logger
}

// Watcher is one process's view of its database: up until an error of an
// outage kind (Observe, or a failed probe), then down until a probe
// succeeds. It logs each outage twice, ERROR when it starts and INFO when it
// ends, however many requests and tasks fail in between, and counts every
// database error by kind. Its methods are safe for concurrent use, and on a
// nil *Watcher (nothing is watched: Observe only classifies).
type Watcher struct {
	cfg    Config
	counts []atomic.Uint64 // by index in Kinds()
	known  map[Kind]int    // a kind's index in counts

	mu   sync.Mutex
	down *OutageError // nil while up
	// slowProbes counts the probes in a row that failed without naming an
	// outage (a timeout).
	slowProbes int
	stop       context.CancelFunc
	done       chan struct{}
}

// New builds a Watcher; Start probes in the background, and an unstarted
// one changes state on Observe and RunOnce alone.
func New(cfg Config) *Watcher {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cfg: cfg, counts: make([]atomic.Uint64, len(Kinds())), known: map[Kind]int{}}
	for i, k := range Kinds() {
		w.known[k] = i
	}
	return w
}

// SetConsequence sets what the ERROR line starting an outage says this
// process does meanwhile (Config.Consequence), for a process that learns
// what it is after its dependencies were built.
func (w *Watcher) SetConsequence(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cfg.Consequence = s
}

// OutageError is the state of a database that is away: what a refused
// caller and /readyz are told. It unwraps to the error that started the
// outage.
type OutageError struct {
	Kind  Kind
	Since time.Time
	Err   error
}

func (e *OutageError) Error() string {
	return fmt.Sprintf("database %s since %s: %v", describe(e.Kind), e.Since.UTC().Format(time.RFC3339), e.Err)
}

func (e *OutageError) Unwrap() error { return e.Err }

// describe is how a log line and an error name a kind of outage.
func describe(k Kind) string {
	if k == ReadOnly {
		return "read-only"
	}
	return "unavailable"
}

// Observe classifies err, counts it when it is a database error, and when
// it is an outage's (Unavailable, ReadOnly) and the database was up, marks
// it down with one ERROR line. It returns err's kind, so callers can log a
// per-request or per-task line only for what is not an outage.
func (w *Watcher) Observe(err error) Kind {
	k := Classify(err)
	if w == nil || k == None {
		return k
	}
	w.count(k)
	if k.Outage() {
		w.markDown(k, err)
	}
	return k
}

func (w *Watcher) count(k Kind) { w.counts[w.known[k]].Add(1) }

// markDown starts an outage of kind k with its ERROR line, or updates the
// one in progress (a failover is unavailable, then read-only) without a
// line.
func (w *Watcher) markDown(k Kind, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down != nil {
		w.down = &OutageError{Kind: k, Since: w.down.Since, Err: err}
		return
	}
	w.down = &OutageError{Kind: k, Since: w.cfg.Clock.Now(), Err: err}
	msg := "database " + describe(k) + ": " + err.Error()
	if w.cfg.Consequence != "" {
		msg += "; " + w.cfg.Consequence
	}
	w.cfg.Logger.Error(msg, "kind", string(k), "error", err.Error())
}

// up marks the database up, with one INFO line when it was down.
func (w *Watcher) up() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.slowProbes = 0
	if w.down == nil {
		return
	}
	d := w.cfg.Clock.Now().Sub(w.down.Since)
	w.cfg.Logger.Info(fmt.Sprintf("database available again after %s", d.Round(100*time.Millisecond)),
		"down_for", d.String(), "kind", string(w.down.Kind))
	w.down = nil
}

// Err is nil while the database is up, else the *OutageError of the outage
// in progress.
func (w *Watcher) Err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down == nil {
		return nil
	}
	return w.down
}

// slowProbesForOutage is how many probes in a row must fail without naming
// an outage (a timeout: an unreachable host drops packets, but a busy pool
// also keeps a probe waiting) before the database is taken to be away.
const slowProbesForOutage = 3

// RunOnce probes the database once: a success ends an outage; a failure
// that names one (no connection, read-only) starts one, and so do
// slowProbesForOutage failures in a row of another kind (a timeout). It
// returns the probe's error.
func (w *Watcher) RunOnce(ctx context.Context) error {
	if w == nil {
		return nil
	}
	err := w.cfg.Probe(ctx)
	if err == nil {
		w.up()
		return nil
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return err // the caller left: nothing learnt
	}
	k := Classify(err)
	if k == None {
		k = Other
	}
	w.count(k)
	if k.Outage() {
		w.markDown(k, err)
		return err
	}
	w.mu.Lock()
	w.slowProbes++
	slow := w.slowProbes >= slowProbesForOutage
	w.mu.Unlock()
	if slow {
		w.markDown(Unavailable, fmt.Errorf("%d probes in a row failed: %w", slowProbesForOutage, err))
	}
	return err
}

// Ready is a readiness check: it probes the database and answers the
// outage in progress, if any, or the probe's own error.
func (w *Watcher) Ready(ctx context.Context) error {
	if err := w.RunOnce(ctx); err != nil {
		if down := w.Err(); down != nil {
			return down
		}
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// Start probes the database every Config.Interval until Stop, so an
// outage is noticed without traffic and its end without a readiness probe.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		return errors.New("database watcher already started")
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stop, w.done = cancel, make(chan struct{})
	go w.loop(ctx, w.done)
	return nil
}

func (w *Watcher) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(w.cfg.Interval)
	defer ticker.Stop()
	for {
		probeCtx, cancel := context.WithTimeout(ctx, max(w.cfg.Interval, time.Second))
		_ = w.RunOnce(probeCtx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Stop ends the probes and waits, up to ctx, for one in progress.
func (w *Watcher) Stop(ctx context.Context) error {
	w.mu.Lock()
	stop, done := w.stop, w.done
	w.stop = nil
	w.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop database watcher: %w", ctx.Err())
	}
}

// Errors counts the database errors observed, by kind, every kind present.
func (w *Watcher) Errors() map[Kind]uint64 {
	out := make(map[Kind]uint64, len(Kinds()))
	for i, k := range Kinds() {
		if w != nil {
			out[k] = w.counts[i].Load()
		} else {
			out[k] = 0
		}
	}
	return out
}
