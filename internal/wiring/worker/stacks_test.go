package worker

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
)

type ctxKey struct{}

// onWarmGoroutine reports whether the caller runs under warmStacks.loop.
func onWarmGoroutine() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*warmStacks).loop") {
			return true
		}
		if !more {
			return false
		}
	}
}

func TestWarmStacksRunTasksOnTheirGoroutinesAndAnswerAsTheHandler(t *testing.T) {
	t.Parallel()
	s := newWarmStacks()
	s.start(4)
	defer s.stop()
	errBoom := errors.New("boom")
	h := s.middleware(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		if !onWarmGoroutine() {
			return errors.New("ran on the caller's goroutine")
		}
		switch task.Type() {
		case "fail":
			return errBoom
		case "panic":
			panic("handler panicked")
		case "ctx":
			if ctx.Value(ctxKey{}) != "v" {
				return errors.New("context not passed")
			}
		}
		return nil
	}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")

	// One at a time a warm goroutine is always free.
	if err := h.ProcessTask(ctx, asynq.NewTask("ok", nil)); err != nil {
		t.Fatal(err)
	}
	if err := h.ProcessTask(ctx, asynq.NewTask("ctx", nil)); err != nil {
		t.Fatal(err)
	}
	if err := h.ProcessTask(ctx, asynq.NewTask("fail", nil)); !errors.Is(err, errBoom) {
		t.Fatalf("error %v, want the handler's", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "handler panicked" {
				t.Fatalf("recovered %v, want the handler's panic on the caller's goroutine", p)
			}
		}()
		_ = h.ProcessTask(ctx, asynq.NewTask("panic", nil))
		t.Fatal("the panic did not reach the caller")
	}()
	// The goroutine that panicked is still serving.
	if err := h.ProcessTask(ctx, asynq.NewTask("ok", nil)); err != nil {
		t.Fatal(err)
	}
}

func TestWarmStacksRunOnTheCallerWhenNoneIsFree(t *testing.T) {
	t.Parallel()
	s := newWarmStacks()
	s.start(1)
	release := make(chan struct{})
	started := make(chan struct{})
	h := s.middleware(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		switch task.Type() {
		case "hold":
			close(started)
			<-release
			return nil
		case "any":
			return nil
		}
		if onWarmGoroutine() {
			return errors.New("ran on a warm goroutine that was busy")
		}
		return nil
	}))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := h.ProcessTask(context.Background(), asynq.NewTask("hold", nil)); err != nil {
			t.Error(err)
		}
	})
	<-started
	if err := h.ProcessTask(context.Background(), asynq.NewTask("other", nil)); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()

	// After stop tasks still run (on whichever goroutine), none waits.
	s.stop()
	s.stop() // idempotent
	for range 3 {
		if err := h.ProcessTask(context.Background(), asynq.NewTask("any", nil)); err != nil {
			t.Fatal(err)
		}
	}
}
