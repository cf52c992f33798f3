package worker

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/hibiken/asynq"
)

// warmStacks runs task handlers on long-lived goroutines. asynq starts a
// new goroutine for every task; a handler's call chain (asynq, pgx, net/http,
// slog) is deep, so each of those goroutines grew its stack two or three
// times, and every growth copies the stack after walking all its frames.
// That was about a twelfth of the worker's CPU in the benchmark
// (docs/performance.md, round 3). A goroutine here keeps the stack it grew
// for the next task. grpc-go's NumStreamWorkers does the same for the same
// reason. BenchmarkWarmStacks (stacks_bench_test.go) shows the effect on a
// handler 200 frames deep: 15.4 µs per task on a new goroutine, 2.7 µs on
// a warm one.
type warmStacks struct {
	jobs chan *stackJob
	quit chan struct{}
	once sync.Once
	// idle counts goroutines free or on their way back to jobs. A task
	// that takes one from it is sure of a goroutine; when it would go
	// below zero, every goroutine is busy.
	idle atomic.Int64
	// free holds spent stackJobs for reuse.
	free sync.Pool
}

// stackJob is one task handed to a warm goroutine, and its answer.
type stackJob struct {
	ctx      context.Context
	task     *asynq.Task
	next     asynq.Handler
	err      error
	panicked any
	done     chan struct{}
}

func newWarmStacks() *warmStacks {
	s := &warmStacks{jobs: make(chan *stackJob), quit: make(chan struct{})}
	s.free.New = func() any { return &stackJob{done: make(chan struct{}, 1)} }
	return s
}

// start starts n goroutines: the worker's concurrency, so that a task
// finds one free except for the moment one takes to come back. Until then
// tasks run on asynq's goroutines.
func (s *warmStacks) start(n int) {
	s.idle.Add(int64(n))
	for range n {
		go s.loop()
	}
}

func (s *warmStacks) loop() {
	for {
		select {
		case j := <-s.jobs:
			j.run()
			s.idle.Add(1)
			j.done <- struct{}{}
		case <-s.quit:
			return
		}
	}
}

func (j *stackJob) run() {
	defer func() {
		if p := recover(); p != nil {
			j.panicked = p
		}
	}()
	j.err = j.next.ProcessTask(j.ctx, j.task)
}

// middleware hands each task to a free goroutine, or runs it on asynq's
// own when every one is busy or they have stopped. A panic in the handler
// is raised again on asynq's goroutine, where asynq turns it into the
// task's error as before.
func (s *warmStacks) middleware(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		if s.idle.Add(-1) < 0 {
			s.idle.Add(1)
			return next.ProcessTask(ctx, t)
		}
		j := s.free.Get().(*stackJob)
		j.ctx, j.task, j.next = ctx, t, next
		select {
		case s.jobs <- j:
			<-j.done
		case <-s.quit:
			s.idle.Add(1)
			*j = stackJob{done: j.done}
			s.free.Put(j)
			return next.ProcessTask(ctx, t)
		}
		err, p := j.err, j.panicked
		*j = stackJob{done: j.done}
		s.free.Put(j)
		if p != nil {
			panic(p)
		}
		return err
	})
}

// stop ends the goroutines: each as soon as it is idle, without waiting for
// one still running a task asynq gave up on at its shutdown timeout. A task
// arriving after stop runs on asynq's goroutine.
func (s *warmStacks) stop() { s.once.Do(func() { close(s.quit) }) }
