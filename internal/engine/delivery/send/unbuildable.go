package send

import (
	"errors"
	"fmt"
)

// ErrUnbuildable marks a request that can never be built: a bad template,
// a rendered body that is not JSON, a field the template needs that the
// document lacks, a bad form field, a bad header line, a bad URL. Retrying
// cannot help, so callers record such deliveries as Exhausted without
// sending (ClassInvalid). Every error from delivery.Build,
// template.Validate, condition.Compile and Condition.Match wraps it and says
// in one line what was wrong, but a stop that is no verdict on the
// definition (budget.NoVerdict). It lives in send, below every package that
// produces it, since Send itself does for a URL it cannot request.
var ErrUnbuildable = errors.New("request cannot be built")

// unbuildableError carries a one-line reason and matches ErrUnbuildable
// without prefixing its text to every message.
type unbuildableError struct{ err error }

func (e *unbuildableError) Error() string { return e.err.Error() }

func (e *unbuildableError) Unwrap() []error { return []error{ErrUnbuildable, e.err} }

// Unbuildable formats a reason like fmt.Errorf (so %w keeps causes
// reachable) and marks it as ErrUnbuildable; Unbuildable("%w", err) marks
// err without changing its text.
func Unbuildable(format string, args ...any) error {
	return &unbuildableError{err: fmt.Errorf(format, args...)}
}
