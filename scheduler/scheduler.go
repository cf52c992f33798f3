// Package scheduler runs the asynq periodic scheduler that enqueues a sweep
// task every sweeper.interval. Running two at once (a rolling deploy) is
// safe: sweeps only enqueue, and retry TaskIDs keep duplicates out.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/logging"
	"github.com/homingdev/homing/tasks"
)

// Scheduler enqueues periodic tasks until stopped.
type Scheduler struct {
	s        *asynq.Scheduler
	interval time.Duration
}

// New builds a scheduler that enqueues a sweep every interval.
func New(redis asynq.RedisConnOpt, interval time.Duration, log *slog.Logger) (*Scheduler, error) {
	s := asynq.NewScheduler(redis, &asynq.SchedulerOpts{
		Location: time.UTC,
		Logger:   logging.Asynq(log),
		LogLevel: asynq.WarnLevel,
	})
	if _, err := s.Register(fmt.Sprintf("@every %s", interval), tasks.NewSweepTask()); err != nil {
		return nil, fmt.Errorf("register sweep every %s: %w", interval, err)
	}
	if _, err := s.Register("@every 1h", tasks.NewRetentionTask()); err != nil {
		return nil, fmt.Errorf("register retention: %w", err)
	}
	return &Scheduler{s: s, interval: interval}, nil
}

// Start begins enqueuing in the background.
func (s *Scheduler) Start(context.Context) error {
	if err := s.s.Start(); err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	return nil
}

// Stop stops enqueuing.
func (s *Scheduler) Stop(context.Context) error {
	s.s.Shutdown()
	return nil
}
