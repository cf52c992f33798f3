package tasks

// The asynq periodic scheduler that enqueues a sweep task every
// sweeper.interval and a retention task every hour (homing scheduler).
// Running two at once (a rolling deploy) is safe: sweeps only enqueue, and
// retry TaskIDs keep duplicates out.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/lib/logging"
)

// Scheduler enqueues periodic tasks until stopped.
type Scheduler struct {
	s        *asynq.Scheduler
	interval time.Duration
}

// NewScheduler builds a scheduler that enqueues a sweep every interval.
func NewScheduler(redis asynq.RedisConnOpt, interval time.Duration, log *slog.Logger) (*Scheduler, error) {
	s := asynq.NewScheduler(redis, &asynq.SchedulerOpts{
		Location: time.UTC,
		Logger:   logging.Asynq(log),
		LogLevel: asynq.WarnLevel,
	})
	if _, err := s.Register(fmt.Sprintf("@every %s", interval), NewSweepTask()); err != nil {
		return nil, fmt.Errorf("register sweep every %s: %w", interval, err)
	}
	if _, err := s.Register("@every 1h", NewRetentionTask()); err != nil {
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
