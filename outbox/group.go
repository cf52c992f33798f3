package outbox

import (
	"context"
	"sync"
	"time"
)

// groupTimeout bounds one grouped statement: it carries other callers'
// inputs too, so it does not follow any one caller's context.
const groupTimeout = 30 * time.Second

// group runs one transaction for many concurrent callers: group commit, as
// the dispatcher's hot path does (dispatch/group.go). A caller that finds no
// run in flight runs at once with every input waiting then (up to
// maxBatch); inputs that arrive meanwhile wait for the next run, which the
// oldest of them leads. A lone caller never waits for a timer, and batches
// grow with load. run returns one result per input, in order; when it fails
// for several inputs, each is run again alone, so one bad input fails only
// its own caller.
type group[In, Out any] struct {
	run      func(ctx context.Context, ins []In) ([]Out, error)
	maxBatch int

	mu      sync.Mutex
	running bool
	pending []*groupCall[In, Out]
}

type groupCall[In, Out any] struct {
	in   In
	out  Out
	err  error
	lead bool // set, before done is closed, when handed the next run
	done chan struct{}
}

// do runs in as part of the next run and returns its result.
func (g *group[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &groupCall[In, Out]{in: in, done: make(chan struct{})}
	g.mu.Lock()
	if g.running {
		g.pending = append(g.pending, c)
		g.mu.Unlock()
		<-c.done
		if !c.lead {
			return c.out, c.err
		}
	} else {
		g.running = true
		g.mu.Unlock()
	}
	g.lead(ctx, c)
	return c.out, c.err
}

// lead runs first and what is pending, hands out the results, and passes
// the next run to the oldest caller still waiting, or ends.
func (g *group[In, Out]) lead(ctx context.Context, first *groupCall[In, Out]) {
	g.mu.Lock()
	n := min(len(g.pending), g.maxBatch-1)
	batch := append([]*groupCall[In, Out]{first}, g.pending[:n]...)
	g.pending = append(g.pending[:0], g.pending[n:]...)
	g.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	outs, err := g.run(rctx, ins)
	switch {
	case err == nil:
		for i, c := range batch {
			c.out = outs[i]
		}
	case len(batch) == 1:
		first.err = err
	default:
		for _, c := range batch {
			var one []Out
			if one, c.err = g.run(rctx, []In{c.in}); c.err == nil {
				c.out = one[0]
			}
		}
	}
	cancel()
	for _, c := range batch[1:] {
		close(c.done)
	}

	g.mu.Lock()
	var next *groupCall[In, Out]
	if len(g.pending) > 0 {
		next = g.pending[0]
		g.pending = append(g.pending[:0], g.pending[1:]...)
		next.lead = true
	} else {
		g.running = false
	}
	g.mu.Unlock()
	if next != nil {
		close(next.done)
	}
}
