package delivery

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// budget is one evaluation's allowance of time, steps and bytes. Every
// evaluator of a definition (a body or URL template, an expr condition, a
// Python condition) gets one, and everything the evaluation does is charged
// to it before it happens: each step, each value built (outputs, captures,
// filter and built-in results, conversions). A budget is used by the one
// goroutine that evaluates, and its first error is final, so an evaluation
// that ignores one refusal meets it again at its next charge.
//
// It also holds the process-wide backstop: every heapCheckEvery steps, and
// before any large allocation, it reads the heap and refuses to go on when
// the process is past its memory ceiling (heapCeiling), whatever this
// evaluation's own budget says.
type budget struct {
	ctx       context.Context
	what      string        // "rendering" or "evaluation", for messages
	limit     time.Duration // the time limit, for messages
	hint      string        // what usually takes many steps, for messages
	memHint   string        // where the memory limit comes from, for messages
	valHint   string        // where the value size limit comes from, for messages
	steps     int           // left
	maxSteps  int
	bytes     int // left of the allocation budget
	maxBytes  int // the whole allocation budget
	maxValue  int // the largest single value
	sinceHeap int
	err       error
}

// budgetLimits are the numbers of one kind of evaluation.
type budgetLimits struct {
	what     string
	hint     string
	memHint  string
	valHint  string
	limit    time.Duration
	steps    int
	bytes    int
	maxValue int
}

func newBudget(ctx context.Context, l budgetLimits) *budget {
	return &budget{ctx: ctx, what: l.what, hint: l.hint, memHint: l.memHint, valHint: l.valHint, limit: l.limit, steps: l.steps, maxSteps: l.steps, bytes: l.bytes, maxBytes: l.bytes, maxValue: l.maxValue}
}

// fail records err as the budget's final error and returns it.
func (b *budget) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// Err is the budget's final error, nil while it holds.
func (b *budget) Err() error { return b.err }

// Step spends one step and notices the deadline.
func (b *budget) Step() error { return b.charge(1) }

// charge spends n steps: the deadline is checked at every charge, and the
// heap every heapCheckEvery steps.
func (b *budget) charge(n int) error {
	if b.err != nil {
		return b.err
	}
	if b.ctx.Err() != nil {
		return b.fail(overTime(b.what, b.limit))
	}
	if n > b.steps {
		return b.fail(overLimit("%s needs more than the limit of %d steps%s", b.what, b.maxSteps, b.hint))
	}
	b.steps -= n
	b.sinceHeap += n
	if b.sinceHeap >= heapCheckEvery {
		b.sinceHeap = 0
		return b.checkHeap()
	}
	return nil
}

// Alloc charges a value of n bytes about to be built; callers charge
// before they build whenever the size is known from the arguments.
func (b *budget) Alloc(n int) error { return b.Hold(n, n) }

const (
	// heapCheckEvery is how many steps pass between two reads of the heap.
	heapCheckEvery = 4096
	// heapCheckBytes is the allocation from which the heap is read at once.
	heapCheckBytes = 64 << 10
	// heapCeilingShare is the share of the process's memory limit
	// (GOMEMLIMIT) past which evaluations stop.
	heapCeilingShare = 0.9
)

// ErrOverloaded marks an evaluation stopped because the whole process was
// past its memory ceiling. It is not the definition's fault and does not
// wrap ErrUnbuildable: the delivery is tried again later.
var ErrOverloaded = errors.New("process over its memory ceiling")

// checkHeap refuses to go on when the live heap is past heapCeiling.
func (b *budget) checkHeap() error {
	ceiling := heapCeiling()
	if ceiling <= 0 {
		return nil
	}
	if used := heapInUse(); used > ceiling {
		return b.fail(fmt.Errorf("%s stopped: the process's heap holds %d MiB, past its ceiling of %d MiB (%d%% of GOMEMLIMIT): %w",
			b.what, used>>20, ceiling>>20, int(heapCeilingShare*100), ErrOverloaded))
	}
	return nil
}

// heapCeiling is heapCeilingShare of the runtime's memory limit (set by
// GOMEMLIMIT or debug.SetMemoryLimit; the commands set a default), or 0
// when the process has none.
func heapCeiling() uint64 {
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return 0
	}
	return uint64(float64(limit) * heapCeilingShare)
}

// heapInUse is the bytes of live and not yet swept heap objects.
func heapInUse() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// stoppedBy is the error of an evaluation its budget stopped: prefix names
// the definition (`condition "x"`, `template`). A limit of the definition's
// own (steps, bytes) wraps ErrUnbuildable, since every retry would meet it
// again; the process's ceiling and the wall-clock time limit do not
// (NoVerdict), since a later attempt may find room or an idle CPU.
func stoppedBy(prefix string, err error) error {
	if NoVerdict(err) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return &unbuildableError{err: fmt.Errorf("%s: %w", prefix, err)}
}

// Hold charges a value that is value bytes long as text (checked against
// the largest single value) and takes mem bytes of memory to hold (charged
// to the allocation budget): a list of a million one-letter strings is a
// few megabytes of text to print but tens of megabytes of Go values. A
// copy of what the document already holds (a list a Python condition
// reads) is Hold(0, mem): the document's own size limit bounds the value.
func (b *budget) Hold(value, mem int) error {
	if b.err != nil {
		return b.err
	}
	if value > b.maxValue {
		return b.fail(overLimit("a value of %s would be larger than the size limit of %d bytes%s", sizeText(value), b.maxValue, b.valHint))
	}
	if mem > b.bytes {
		return b.fail(overLimit("%s would build more than the memory limit of %d bytes of values%s", b.what, b.maxBytes, b.memHint))
	}
	b.bytes -= mem
	if mem >= heapCheckBytes {
		return b.checkHeap()
	}
	return nil
}
