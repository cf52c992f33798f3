package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// MaxDepth bounds how deeply an evaluation or an encoder follows nested
// maps and lists (a document, a value a template builds), so a document
// that contains itself fails instead of overflowing the stack.
const MaxDepth = 1000

// MaxSourceBytes caps a definition's source (a template, a condition) so
// that a pasted mistake (or a hostile webhook) cannot make every delivery
// parse megabytes.
const MaxSourceBytes = 64 << 10

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
type Budget struct {
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

// Limits are the numbers of one kind of evaluation, and the words its
// errors say them with.
type Limits struct {
	What     string        // "rendering" or "evaluation"
	Hint     string        // what usually takes many steps
	MemHint  string        // where the memory limit comes from
	ValHint  string        // where the value size limit comes from
	Limit    time.Duration // the time limit, which ctx enforces
	Steps    int
	Bytes    int // the allocation budget
	MaxValue int // the largest single value
}

// New is a budget of l for one evaluation, whose deadline is ctx's.
func New(ctx context.Context, l Limits) *Budget {
	return &Budget{ctx: ctx, what: l.What, hint: l.Hint, memHint: l.MemHint, valHint: l.ValHint, limit: l.Limit, steps: l.Steps, maxSteps: l.Steps, bytes: l.Bytes, maxBytes: l.Bytes, maxValue: l.MaxValue}
}

// Fail records err as the budget's final error and returns it.
func (b *Budget) Fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// Err is the budget's final error, nil while it holds.
func (b *Budget) Err() error { return b.err }

// BytesLeft is what is left of the allocation budget.
func (b *Budget) BytesLeft() int { return b.bytes }

// StepsLeft is how many steps are left.
func (b *Budget) StepsLeft() int { return b.steps }

// MaxValue is the largest single value the budget allows, in bytes.
func (b *Budget) MaxValue() int { return b.maxValue }

// Spent is the steps and bytes of allocation the evaluation has used.
func (b *Budget) Spent() (steps, bytes int) { return b.maxSteps - b.steps, b.maxBytes - b.bytes }

// Step spends one step and notices the deadline.
func (b *Budget) Step() error { return b.Charge(1) }

// Charge spends n steps: the deadline is checked at every charge, and the
// heap every heapCheckEvery steps.
func (b *Budget) Charge(n int) error {
	if b.err != nil {
		return b.err
	}
	if b.ctx.Err() != nil {
		return b.Fail(OverTime(b.what, b.limit))
	}
	if n > b.steps {
		return b.Fail(OverLimit("%s needs more than the limit of %d steps%s", b.what, b.maxSteps, b.hint))
	}
	b.steps -= n
	b.sinceHeap += n
	if b.sinceHeap >= heapCheckEvery {
		b.sinceHeap = 0
		return b.CheckHeap()
	}
	return nil
}

// Alloc charges a value of n bytes about to be built; callers charge
// before they build whenever the size is known from the arguments.
func (b *Budget) Alloc(n int) error { return b.Hold(n, n) }

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
// wrap send.ErrUnbuildable: the delivery is tried again later.
var ErrOverloaded = errors.New("process over its memory ceiling")

// CheckHeap refuses to go on when the live heap is past heapCeiling.
func (b *Budget) CheckHeap() error {
	ceiling := heapCeiling()
	if ceiling <= 0 {
		return nil
	}
	if used := heapInUse(); used > ceiling {
		return b.Fail(fmt.Errorf("%s stopped: the process's heap holds %d MiB, past its ceiling of %d MiB (%d%% of GOMEMLIMIT): %w",
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

// Hold charges a value that is value bytes long as text (checked against
// the largest single value) and takes mem bytes of memory to hold (charged
// to the allocation budget): a list of a million one-letter strings is a
// few megabytes of text to print but tens of megabytes of Go values. A
// copy of what the document already holds (a list a Python condition
// reads) is Hold(0, mem): the document's own size limit bounds the value.
func (b *Budget) Hold(value, mem int) error {
	if b.err != nil {
		return b.err
	}
	if value > b.maxValue {
		return b.Fail(OverLimit("a value of %s would be larger than the size limit of %d bytes%s", sizeText(value), b.maxValue, b.valHint))
	}
	if mem > b.bytes {
		return b.Fail(OverLimit("%s would build more than the memory limit of %d bytes of values%s", b.what, b.maxBytes, b.memHint))
	}
	b.bytes -= mem
	if mem >= heapCheckBytes {
		return b.CheckHeap()
	}
	return nil
}
