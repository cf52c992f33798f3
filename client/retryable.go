package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/intake/dbstate"
)

// ErrRetryable matches (errors.Is) every error after which the same call,
// with the same event ID, may succeed: Homing's database or Redis was away
// (a failover, a restart), or homing serve asked the caller to come back
// (503 or 429 with Retry-After). Repeating an event ID never delivers it
// twice. A *RetryableError carries the wait serve asked for.
var ErrRetryable = errors.New("retryable: Homing could not take the event now; publish it again, with the same event ID")

// RetryableError is an error that ErrRetryable matches.
type RetryableError struct {
	// RetryAfter is how long homing serve asked the caller to wait (its
	// Retry-After); 0 when it did not say.
	RetryAfter time.Duration
	Err        error
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRetryable) hold.
func (e *RetryableError) Is(target error) bool { return target == ErrRetryable }

// IsRetryable reports whether the call that returned err may succeed when
// made again: errors.Is(err, ErrRetryable).
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// RetryAfter is how long the call that returned err asks to wait before it
// is made again, and whether it is retryable at all. A retryable error that
// names no wait answers 0, true: pick your own backoff.
func RetryAfter(err error) (time.Duration, bool) {
	var re *RetryableError
	if errors.As(err, &re) {
		return re.RetryAfter, true
	}
	return 0, false
}

// retryable wraps err as a *RetryableError; nil stays nil.
func retryable(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryableError{RetryAfter: after, Err: err}
}

// databaseError marks err retryable when it is a database error a retry
// may get past (dbstate.Retryable: no connection, a read-only primary, a
// lost serialization).
func databaseError(err error) error {
	if dbstate.Retryable(err) {
		return retryable(err, 0)
	}
	return err
}

// transportError marks an error reaching Redis or homing serve retryable,
// unless the caller's own context ended it.
func transportError(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return retryable(err, 0)
}

// retryAfterHeader reads a Retry-After of seconds (what homing serve
// sends); an HTTP date or nothing is 0.
func retryAfterHeader(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
