package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// A Sleep on a Stub returns when the clock has been moved far enough, not a
// nanosecond before; Sleeping is the event of a Sleep starting, and a woken
// Sleep is no longer counted once Advance returns.
func TestStubSleepWakesWhenAdvancedPastIt(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	done := make(chan error, 1)
	go func() { done <- c.Sleep(context.Background(), time.Second) }()
	<-c.Sleeping(1)
	if at, ok := c.NextWake(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("next wake %v %v, want %v", at, ok, t0.Add(time.Second))
	}
	c.Advance(999 * time.Millisecond)
	if _, ok := c.NextWake(); !ok {
		t.Fatal("a Sleep of 1s woke after 999ms")
	}
	c.Advance(time.Millisecond)
	if _, ok := c.NextWake(); ok {
		t.Fatal("a Sleep of 1s still waits after 1s")
	}
	if err := <-done; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
}

// Set wakes the Sleeps it passes and keeps the others.
func TestStubSetWakesOnlyWhatItPasses(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	short, long := make(chan error, 1), make(chan error, 1)
	go func() { short <- c.Sleep(context.Background(), time.Second) }()
	go func() { long <- c.Sleep(context.Background(), time.Hour) }()
	<-c.Sleeping(2)
	c.Set(t0.Add(time.Minute))
	if err := <-short; err != nil {
		t.Fatal(err)
	}
	if at, ok := c.NextWake(); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next wake %v %v, want the hour's", at, ok)
	}
	c.Advance(time.Hour)
	if err := <-long; err != nil {
		t.Fatal(err)
	}
}

// A Sleep whose context ends returns the context's error and stops
// counting as waiting; a Sleep of nothing returns at once.
func TestStubSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Sleep(ctx, time.Second) }()
	<-c.Sleeping(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after its context ended: %v, want context.Canceled", err)
	}
	if _, ok := c.NextWake(); ok {
		t.Fatal("a cancelled Sleep still counts as waiting")
	}
}

// Real's Sleep ends with its context, whatever is left of d.
func TestRealSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (clock.Real{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with an ended context: %v, want context.Canceled", err)
	}
}
