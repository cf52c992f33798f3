// Package clock gives services an injectable notion of "now", and of
// waiting, so the retry schedule (0, +5m, +35m, +2h35m) and a service's own
// waits (a sweep tick's polls, a probe's gap) can be exercised in
// milliseconds by tests, as events rather than as durations.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock returns the current time and waits on it. Domain code asks a Clock
// instead of calling time.Now or time.NewTimer, so tests can move time
// forward deterministically (Tailscale's tstime.Clock is the model).
type Clock interface {
	Now() time.Time
	// Sleep waits until d has passed on this clock, or until ctx ends,
	// when it returns ctx's error. A d of zero or less returns at once.
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the wall clock, in UTC.
type Real struct{}

// Now returns the current wall-clock time in UTC.
func (Real) Now() time.Time { return time.Now().UTC() }

// Sleep waits d of real time, or until ctx ends.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stub is a clock that only moves when told to. It is safe for concurrent
// use. A Sleep on it returns once Advance or Set has moved it far enough;
// Sleeping tells a test when the code under test has started waiting, so
// the test advances the clock on that event instead of after a guess.
type Stub struct {
	mu       sync.Mutex
	t        time.Time
	sleepers []*sleeper
	watches  []watch
}

// sleeper is one Sleep waiting on a Stub.
type sleeper struct {
	until time.Time
	wake  chan struct{}
}

// watch is one Sleeping call not answered yet.
type watch struct {
	n    int
	done chan struct{}
}

// NewStub returns a Stub set to t.
func NewStub(t time.Time) *Stub { return &Stub{t: t.UTC()} }

// Now returns the stub's current time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// Advance moves the stub forward by d, wakes every Sleep that has waited
// long enough, and returns the new time. The Sleeps it wakes are no longer
// counted by Sleeping when it returns.
func (s *Stub) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = s.t.Add(d)
	s.wakeLocked()
	return s.t
}

// Set moves the stub to t, waking every Sleep that has waited long enough.
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t.UTC()
	s.wakeLocked()
}

// Sleep waits until the stub has been moved d past the time of the call, or
// until ctx ends.
func (s *Stub) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	s.mu.Lock()
	sl := &sleeper{until: s.t.Add(d), wake: make(chan struct{})}
	s.sleepers = append(s.sleepers, sl)
	s.notifyLocked()
	s.mu.Unlock()
	select {
	case <-sl.wake:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.removeLocked(sl)
		s.mu.Unlock()
		return ctx.Err()
	}
}

// Sleeping returns a channel that is closed once at least n Sleeps are
// waiting on the stub: the event a test waits for before it moves the
// clock.
func (s *Stub) Sleeping(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := watch{n: n, done: make(chan struct{})}
	s.watches = append(s.watches, w)
	s.notifyLocked()
	return w.done
}

// NextWake is when the earliest waiting Sleep returns; false when none
// waits.
func (s *Stub) NextWake() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, sl := range s.sleepers {
		if next.IsZero() || sl.until.Before(next) {
			next = sl.until
		}
	}
	return next, !next.IsZero()
}

// wakeLocked wakes the sleepers whose time has come.
func (s *Stub) wakeLocked() {
	kept := s.sleepers[:0]
	for _, sl := range s.sleepers {
		if s.t.Before(sl.until) {
			kept = append(kept, sl)
		} else {
			close(sl.wake)
		}
	}
	clear(s.sleepers[len(kept):])
	s.sleepers = kept
}

// removeLocked forgets a sleeper whose context ended (it may have been
// woken at the same moment: then it is gone already).
func (s *Stub) removeLocked(sl *sleeper) {
	for i, o := range s.sleepers {
		if o == sl {
			s.sleepers = append(s.sleepers[:i], s.sleepers[i+1:]...)
			return
		}
	}
}

// notifyLocked answers the Sleeping calls that now hold.
func (s *Stub) notifyLocked() {
	kept := s.watches[:0]
	for _, w := range s.watches {
		if len(s.sleepers) >= w.n {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	clear(s.watches[len(kept):])
	s.watches = kept
}
