// Package groupcommit runs one statement (or one transaction) for many
// concurrent callers: group commit. The delivery hot path (dispatch) and the
// outbox's writes and releases (outbox) share it.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Group runs one statement for many concurrent callers: group commit. Each
// caller hands in its input and waits; a caller that finds fewer than
// maxRunning statements in flight becomes the leader and runs, as one
// statement, every input waiting at that moment (up to maxBatch). Inputs
// that arrive while statements run wait for the next one, so batches grow
// with load by themselves and a lone caller runs at once, never waiting for
// a timer.
//
// On PostgreSQL a statement's fixed cost (the round trip, parse and bind,
// the transaction and its commit, the WAL flush) is most of what a one-row
// statement costs, on both sides of the connection; the worker's delivery
// hot path pays it once per batch instead of once per delivery.
//
// What can now happen twice? Nothing: every input is run in exactly one
// statement, whose result goes to its caller alone. A statement that fails
// for a batch of several inputs is run again input by input, so one bad
// input fails only its own caller (run must therefore be safe to repeat for
// inputs the failed statement did not change: it is one statement, which
// either committed as a whole or not at all).
type Group[In, Out any] struct {
	// run runs one statement for ins and returns one result per input, in
	// order.
	run        func(ctx context.Context, ins []In) ([]Out, error)
	maxBatch   int
	maxRunning int
	// timeout bounds one run. It does not follow any one caller's
	// context: the statement carries other callers' inputs too, and a
	// shutdown must not lose the outcome of a request that was sent.
	timeout time.Duration

	mu      sync.Mutex
	pending []*groupCall[In, Out]
	running int
}

type groupCall[In, Out any] struct {
	in  In
	out Out
	err error
	// lead is set, before done is closed, when this call is handed the
	// leadership instead of a result.
	lead bool
	done chan struct{}
}

// New is a Group running run with at most maxBatch inputs a run and
// maxRunning runs at once, each bounded by timeout.
func New[In, Out any](run func(ctx context.Context, ins []In) ([]Out, error), maxBatch, maxRunning int, timeout time.Duration) *Group[In, Out] {
	return &Group[In, Out]{run: run, maxBatch: max(1, maxBatch), maxRunning: max(1, maxRunning), timeout: timeout}
}

// Do runs in as part of the next statement and returns its result.
func (g *Group[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	c := &groupCall[In, Out]{in: in, done: make(chan struct{})}
	g.mu.Lock()
	if g.running < g.maxRunning {
		g.running++
		g.mu.Unlock()
		g.lead(ctx, c)
		return c.out, c.err
	}
	g.pending = append(g.pending, c)
	g.mu.Unlock()
	<-c.done
	if c.lead {
		// Handed the leadership (and taken out of pending): run the next
		// batch, this input first.
		g.lead(ctx, c)
	}
	return c.out, c.err
}

// lead runs first and what is pending as one batch, then hands the
// leadership to the oldest input still waiting, or gives its slot back when
// none is. Every call leaves pending exactly once, under mu: into a batch or
// as the next leader, so each done is closed once.
func (g *Group[In, Out]) lead(ctx context.Context, first *groupCall[In, Out]) {
	g.mu.Lock()
	n := min(len(g.pending), g.maxBatch-1)
	batch := make([]*groupCall[In, Out], 0, n+1)
	batch = append(batch, first)
	batch = append(batch, g.pending[:n]...)
	g.pending = append(g.pending[:0], g.pending[n:]...)
	g.mu.Unlock()

	g.runBatch(ctx, batch)

	g.mu.Lock()
	var next *groupCall[In, Out]
	if len(g.pending) > 0 {
		next = g.pending[0]
		g.pending = append(g.pending[:0], g.pending[1:]...)
		next.lead = true
	} else {
		g.running--
	}
	g.mu.Unlock()
	if next != nil {
		close(next.done)
	}
}

// runBatch runs batch as one statement, or input by input when that fails
// for several, and hands every call its result. batch[0] is the leader,
// which is not waiting on done.
func (g *Group[In, Out]) runBatch(ctx context.Context, batch []*groupCall[In, Out]) {
	if len(batch) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer cancel()
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	outs, err := g.run(rctx, ins)

	if err != nil && len(batch) > 1 {
		for _, c := range batch {
			var one []Out
			one, c.err = g.run(rctx, []In{c.in})
			if c.err == nil {
				c.out = one[0]
			}
		}
	} else {
		for i, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.out = outs[i]
			}
		}
	}
	for _, c := range batch[1:] {
		close(c.done)
	}
}
