package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pendingLen is how many inputs wait for a statement.
func (g *Group[In, Out]) pendingLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// waitPending yields until n inputs wait behind the running statement.
func waitPending[In, Out any](t *testing.T, g *Group[In, Out], n int) {
	t.Helper()
	for g.pendingLen() < n {
		runtime.Gosched()
	}
}

// blockingRun is a statement that doubles its inputs and holds its first
// run until released, so that the test decides what the next batch holds.
type blockingRun struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{}
	release chan struct{}
}

func newBlockingRun() *blockingRun {
	return &blockingRun{started: make(chan struct{}), release: make(chan struct{})}
}

func (r *blockingRun) run(_ context.Context, ins []int) ([]int, error) {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(ins))
	first := len(r.batches) == 1
	r.mu.Unlock()
	if first {
		close(r.started)
		<-r.release
	}
	var bad error
	out := make([]int, len(ins))
	for i, in := range ins {
		if in < 0 {
			bad = errors.New("negative input")
		}
		out[i] = 2 * in
	}
	return out, bad
}

// result is one caller's input and what it got.
type result struct {
	in, out int
	err     error
}

// heldRun runs 1 through a group of maxBatch whose statement holds it,
// queues the other inputs behind it, then releases it and returns every
// result and the batches the statement saw.
func heldRun(t *testing.T, maxBatch int, inputs []int) ([]result, [][]int) {
	t.Helper()
	r := newBlockingRun()
	g := New(r.run, maxBatch, 1, time.Minute)
	results := make(chan result, len(inputs)+1)
	do := func(in int) {
		go func() {
			out, err := g.Do(context.Background(), in)
			results <- result{in, out, err}
		}()
	}
	do(1)
	<-r.started
	for _, in := range inputs {
		do(in)
	}
	waitPending(t, g, len(inputs))
	close(r.release)
	var all []result
	for range len(inputs) + 1 {
		all = append(all, <-results)
	}
	return all, r.batches
}

// checkDoubled fails for a result that is not its input doubled.
func checkDoubled(t *testing.T, results []result) {
	t.Helper()
	for _, res := range results {
		if res.err != nil || res.out != 2*res.in {
			t.Errorf("input %d: got %d, %v; want %d", res.in, res.out, res.err, 2*res.in)
		}
	}
}

// Inputs that arrive while a statement runs go together in the next one,
// and each caller gets its own input's result.
func TestGroupBatchesWhatWaits(t *testing.T) {
	results, batches := heldRun(t, 100, []int{2, 3, 4, 5, 6, 7, 8, 9, 10})
	checkDoubled(t, results)
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 9 {
		t.Fatalf("batches %v, want [1] then the 9 that waited", batches)
	}
}

// A batch never holds more than maxBatch inputs: the rest go next.
func TestGroupSplitsAtMaxBatch(t *testing.T) {
	results, batches := heldRun(t, 4, []int{2, 3, 4, 5, 6, 7, 8, 9, 10})
	checkDoubled(t, results)
	var sizes []int
	for _, b := range batches {
		sizes = append(sizes, len(b))
	}
	if !slices.Equal(sizes, []int{1, 4, 4, 1}) {
		t.Fatalf("batch sizes %v, want [1 4 4 1]", sizes)
	}
}

// A statement that fails for a batch is run again input by input: the bad
// input fails its own caller and no other.
func TestGroupFailureFailsOnlyTheBadInput(t *testing.T) {
	results, batches := heldRun(t, 100, []int{2, -3, 4})
	for _, res := range results {
		if res.in < 0 && res.err == nil {
			t.Errorf("input %d succeeded, want its error", res.in)
		}
		if res.in >= 0 {
			checkDoubled(t, []result{res})
		}
	}
	// [1], the failed [2 -3 4], then each alone.
	if len(batches) != 5 || len(batches[1]) != 3 {
		t.Fatalf("batches %v, want [1] [2 -3 4] [2] [-3] [4]", batches)
	}
}

// Under many concurrent callers every input runs exactly once, never more
// than maxRunning statements at a time and never more than maxBatch inputs
// in one.
func TestGroupUnderLoad(t *testing.T) {
	const callers, maxBatch, maxRunning = 2000, 16, 2
	var (
		running, peak atomic.Int32
		seen          sync.Map
		twice         atomic.Int32
		tooBig        atomic.Int32
	)
	g := &Group[int, int]{maxBatch: maxBatch, maxRunning: maxRunning}
	g.run = func(_ context.Context, ins []int) ([]int, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if len(ins) > maxBatch {
			tooBig.Add(1)
		}
		out := make([]int, len(ins))
		for i, in := range ins {
			if _, dup := seen.LoadOrStore(in, true); dup {
				twice.Add(1)
			}
			out[i] = 2 * in
			runtime.Gosched()
		}
		return out, nil
	}
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for i := range callers {
		wg.Go(func() {
			if out, err := g.Do(context.Background(), i); err != nil || out != 2*i {
				wrong.Add(1)
			}
		})
	}
	wg.Wait()
	n := 0
	seen.Range(func(any, any) bool { n++; return true })
	if n != callers || twice.Load() != 0 || wrong.Load() != 0 || tooBig.Load() != 0 || peak.Load() > maxRunning {
		t.Fatalf("ran %d of %d inputs, %d twice, %d wrong results, %d oversized batches, %d statements at once (max %d)",
			n, callers, twice.Load(), wrong.Load(), tooBig.Load(), peak.Load(), maxRunning)
	}
	if g.running != 0 || g.pendingLen() != 0 {
		t.Fatalf("left %d running, %d pending", g.running, g.pendingLen())
	}
}
