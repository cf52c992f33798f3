// Package sweeper finds deliveries whose retry has come due and enqueues a
// retry task for each. It never sends anything itself, so a tick takes
// milliseconds however slow the receivers are.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/clock"
	"github.com/homingdev/homing/models"
)

// enqueuers is how many retry tasks a tick queues at once.
const enqueuers = 8

// DefaultBatchSize caps one tick, so a backlog drains over several ticks
// instead of flooding the queue at once.
const DefaultBatchSize = 500

// Config wires a Sweeper.
type Config struct {
	BatchSize int
	Clock     clock.Clock
	Logger    *slog.Logger
	// NewTask builds the retry task of a delivery (tasks.NewRetryTask).
	NewTask func(deliveryID, webhook, queue string) *asynq.Task
	// TaskID names that task (tasks.RetryTaskID): the concurrency guard.
	TaskID func(deliveryID string) string
	// Observer is told of every tick, for metrics; nil is none.
	Observer Observer
}

// Observer is told how long each tick took, by the sweeper's clock, and how
// many retry tasks it queued, failed ticks included.
type Observer interface {
	Sweep(d time.Duration, enqueued int)
}

// Sweeper enqueues retries of due deliveries.
type Sweeper struct {
	db        *gorm.DB
	client    *asynq.Client
	inspector *asynq.Inspector
	cfg       Config
}

// New builds a Sweeper.
func New(db *gorm.DB, client *asynq.Client, inspector *asynq.Inspector, cfg Config) *Sweeper {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{db: db, client: client, inspector: inspector, cfg: cfg}
}

// Result counts what one tick did.
type Result struct {
	// Due is how many due rows the tick read (at most the batch size).
	Due int
	// Enqueued is how many retry tasks it queued.
	Enqueued int
	// InHand is how many already had a retry task pending, scheduled,
	// active or waiting in asynq's retry set.
	InHand int
	// Revived is how many had a dead task (archived or completed) holding
	// their TaskID, which the tick deleted and replaced.
	Revived int
}

type dueRow struct {
	ID          string
	WebhookName string
	Queue       *string
}

// RunOnce runs one tick: select the oldest due Failed rows, at most a batch,
// and enqueue a retry task for each with TaskID webhook_retry::<id>.
func (s *Sweeper) RunOnce(ctx context.Context) (Result, error) {
	now := s.cfg.Clock.Now().UTC()
	res, err := s.sweep(ctx, now)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Sweep(s.cfg.Clock.Now().Sub(now), res.Enqueued)
	}
	return res, err
}

// sweep is RunOnce's tick, at now.
func (s *Sweeper) sweep(ctx context.Context, now time.Time) (Result, error) {
	var rows []dueRow
	// Served by deliveries_due (next_retry) WHERE status = 'Failed'; the join
	// is by primary key.
	err := s.db.WithContext(ctx).Raw(`SELECT d.id AS id, d.webhook_name AS webhook_name, w.queue AS queue
		FROM deliveries d LEFT JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.status = 'Failed' AND d.next_retry <= ?
		ORDER BY d.next_retry
		LIMIT ?`, now, s.cfg.BatchSize).Scan(&rows).Error
	if err != nil {
		return Result{}, fmt.Errorf("select due deliveries: %w", err)
	}
	res := Result{Due: len(rows)}
	// Each row is one round trip to Redis (or a few, for a conflict): a
	// few at a time keep a whole batch to milliseconds. The rows are
	// independent; each one's TaskID still guards it alone.
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan dueRow)
	)
	for range min(enqueuers, len(rows)) {
		wg.Go(func() {
			for r := range next {
				queue := "default"
				if r.Queue != nil && *r.Queue != "" {
					queue = *r.Queue
				}
				outcome, err := s.enqueue(ctx, r.ID, r.WebhookName, queue)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case outcome == enqueued:
					res.Enqueued++
				case outcome == inHand:
					res.InHand++
				case outcome == revived:
					res.Enqueued++
					res.Revived++
				}
				mu.Unlock()
			}
		})
	}
	for _, r := range rows {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break // stop at the first failure, as a sequential tick would
		}
		next <- r
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return res, errs[0]
	}
	if res.Due > 0 {
		s.cfg.Logger.Info("sweep", "due", res.Due, "enqueued", res.Enqueued, "in_hand", res.InHand, "revived", res.Revived)
	}
	return res, nil
}

type enqueueOutcome int

const (
	enqueued enqueueOutcome = iota
	inHand
	revived
)

// enqueue queues one retry. A TaskID conflict means a task with that ID
// exists in the queue: if it is still going to run, the delivery is in hand;
// if it is dead (archived, or completed and retained), it would block this
// delivery forever, so it is deleted and the retry queued afresh.
func (s *Sweeper) enqueue(ctx context.Context, id, webhook, queue string) (enqueueOutcome, error) {
	taskID := s.cfg.TaskID(id)
	for try := 0; try < 3; try++ {
		_, err := s.client.EnqueueContext(ctx, s.cfg.NewTask(id, webhook, queue))
		if err == nil {
			if try > 0 {
				return revived, nil
			}
			return enqueued, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return enqueued, fmt.Errorf("enqueue retry of delivery %s: %w", id, err)
		}
		info, err := s.inspector.GetTaskInfo(queue, taskID)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound):
			continue // finished between our enqueue and our look: try again
		case err != nil:
			return enqueued, fmt.Errorf("inspect retry task of delivery %s: %w", id, err)
		}
		switch info.State {
		case asynq.TaskStateArchived, asynq.TaskStateCompleted:
			if err := s.inspector.DeleteTask(queue, taskID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
				return enqueued, fmt.Errorf("delete dead retry task of delivery %s: %w", id, err)
			}
			s.cfg.Logger.Warn("replaced a dead retry task", "delivery", id, "state", info.State.String())
			continue
		default:
			return inHand, nil
		}
	}
	return inHand, nil
}

// Backlog reports how many Failed rows are due now and since when the oldest
// has been waiting (zero when none), for stats and metrics.
func (s *Sweeper) Backlog(ctx context.Context) (int64, time.Time, error) {
	now := s.cfg.Clock.Now().UTC()
	var count int64
	q := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ? AND next_retry <= ?", models.StatusFailed, now)
	if err := q.Count(&count).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("count due deliveries: %w", err)
	}
	if count == 0 {
		return 0, time.Time{}, nil
	}
	var oldest models.Delivery
	if err := s.db.WithContext(ctx).Select("next_retry").Where("status = ? AND next_retry <= ?", models.StatusFailed, now).
		Order("next_retry").Take(&oldest).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("oldest due delivery: %w", err)
	}
	return count, *oldest.NextRetry, nil
}
