// Package clock gives services an injectable notion of "now", so the retry
// schedule (0, +5m, +35m, +2h35m) can be exercised in milliseconds by tests.
package clock

import (
	"sync"
	"time"
)

// Clock returns the current time. Domain code asks a Clock instead of calling
// time.Now, so tests can move time forward deterministically.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock, in UTC.
type Real struct{}

// Now returns the current wall-clock time in UTC.
func (Real) Now() time.Time { return time.Now().UTC() }

// Stub is a clock that only moves when told to. It is safe for concurrent use.
type Stub struct {
	mu sync.Mutex
	t  time.Time
}

// NewStub returns a Stub set to t.
func NewStub(t time.Time) *Stub { return &Stub{t: t.UTC()} }

// Now returns the stub's current time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// Advance moves the stub forward by d and returns the new time.
func (s *Stub) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = s.t.Add(d)
	return s.t
}

// Set moves the stub to t.
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t.UTC()
}
