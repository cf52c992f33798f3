package worker

import (
	"context"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
)

// deep recurses n frames with a frame-sized buffer each, standing in for a
// handler's call chain (asynq, pgx, net/http, slog) that grows a fresh
// goroutine's stack several times.
//
//go:noinline
func deep(n int) int {
	var buf [256]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return int(buf[0])
	}
	return deep(n-1) + int(buf[n%len(buf)])
}

// BenchmarkWarmStacks is one task with a deep handler run the way asynq runs
// it (a new goroutine per task) and through warmStacks (a goroutine that
// kept the stack it grew): the reason warmStacks exists.
func BenchmarkWarmStacks(b *testing.B) {
	handler := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		_ = deep(200)
		return nil
	})
	task := asynq.NewTask("bench", nil)
	ctx := context.Background()
	b.Run("new goroutine per task", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var wg sync.WaitGroup
			wg.Go(func() { _ = handler.ProcessTask(ctx, task) })
			wg.Wait()
		}
	})
	b.Run("warm stacks", func(b *testing.B) {
		s := newWarmStacks()
		s.start(1)
		defer s.stop()
		h := s.middleware(handler)
		b.ReportAllocs()
		for b.Loop() {
			var wg sync.WaitGroup
			wg.Go(func() { _ = h.ProcessTask(ctx, task) })
			wg.Wait()
		}
	})
}
