package budget

import (
	"errors"
	"fmt"
	"time"
)

// ErrLimit marks a template or condition stopped by one of its limits (time,
// steps, value size, memory). The deterministic ones (steps, sizes, memory)
// also wrap send.ErrUnbuildable: the same definition and document meet the
// same limit on every retry. The time limit does not (ErrTimeLimit):
// ErrLimit alone is never a reason to give up on a delivery.
var ErrLimit = errors.New("limit exceeded")

// ErrTimeLimit marks an evaluation stopped by its wall-clock time limit
// (template.MaxRenderTime, condition.MaxTime). Unlike steps and bytes, time
// is not the definition's alone: CPU load from other work on the same
// process can push a cheap template past it, so the same definition and
// document may pass on a later try. It wraps ErrLimit but not
// send.ErrUnbuildable (NoVerdict).
var ErrTimeLimit = errors.New("time limit reached")

// limitError is an error that names the limit it hit.
type limitError struct {
	msg  string
	time bool // the wall-clock time limit (ErrTimeLimit)
}

func (e *limitError) Error() string { return e.msg }

func (e *limitError) Unwrap() []error {
	if e.time {
		return []error{ErrLimit, ErrTimeLimit}
	}
	return []error{ErrLimit}
}

// OverLimit is the error of an evaluation past one of its deterministic
// limits (steps, a value's size, memory), formatted as by fmt.Sprintf. It
// matches ErrLimit; the evaluator that meets it marks it
// send.ErrUnbuildable.
func OverLimit(format string, args ...any) error {
	return &limitError{msg: fmt.Sprintf(format, args...)}
}

// OverTime is the error of an evaluation past its time limit.
func OverTime(what string, limit time.Duration) error {
	return &limitError{msg: fmt.Sprintf("%s took longer than the time limit of %s", what, limit), time: true}
}

// NoVerdict reports whether err stopped an evaluation for a reason that
// says nothing final about the definition: the process's heap ceiling
// (ErrOverloaded) or the wall-clock time limit (ErrTimeLimit), which load
// from other work can reach. Such an error never wraps send.ErrUnbuildable:
// the evaluation is tried again later, not refused or Exhausted.
func NoVerdict(err error) bool {
	return errors.Is(err, ErrOverloaded) || errors.Is(err, ErrTimeLimit)
}
