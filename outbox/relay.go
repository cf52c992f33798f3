package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/store"
	"github.com/homingdev/homing/tasks"
)

// Defaults of RelayConfig.
const (
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 500
)

// RelayConfig says how a Relay finds and paces its work.
type RelayConfig struct {
	// PollInterval (outbox.poll_interval) is how often the relay looks for
	// committed events without being told; DefaultPollInterval when zero.
	PollInterval time.Duration
	// BatchSize is the most rows one RunOnce moves (one transaction).
	BatchSize int
	// ListenURL is the PostgreSQL URL the relay LISTENs on for the outbox
	// trigger's notifications; empty (SQLite) means polling only.
	ListenURL string
	Logger    *slog.Logger
}

// Relay moves committed outbox rows into asynq as webhook:event tasks with
// TaskID webhook_event::<event id>, and deletes each row only once its
// enqueue succeeded. Several relays may run at once (scheduler, homing
// serve, a starting worker): on PostgreSQL each locks its batch with SKIP
// LOCKED, so they share the work instead of repeating it.
type Relay struct {
	db     *gorm.DB
	client *asynq.Client
	cfg    RelayConfig

	// afterEnqueue, when set (by tests), runs after a batch is enqueued and
	// before its rows are deleted; an error makes RunOnce stop there, as a
	// crash would: the transaction rolls back and the rows stay.
	afterEnqueue func() error

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRelay builds a relay over db's outbox that enqueues with client.
func NewRelay(db *gorm.DB, client *asynq.Client, cfg RelayConfig) *Relay {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{db: db, client: client, cfg: cfg}
}

// RunOnce moves at most one batch of committed events, oldest first, and
// reports how many rows it removed from the outbox. Rows whose enqueue
// succeeded are deleted even when a later enqueue in the batch failed; that
// failure is returned and the remaining rows wait for the next run.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	moved := 0
	var enqueueErr error
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []models.OutboxEvent
		q := tx.Order("id").Limit(r.cfg.BatchSize)
		if store.DialectOf(tx) == store.Postgres {
			// Another relay's batch is skipped, not waited for.
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		// Served by outbox_events' primary key.
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		done := make([]int64, 0, len(rows))
		for _, row := range rows {
			_, err := r.client.EnqueueContext(ctx, tasks.EventTask(row.EventID, []byte(row.Payload)))
			// A conflict means the event's task is already in Redis: an
			// earlier run enqueued it and died before deleting the row.
			if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
				enqueueErr = fmt.Errorf("queue outbox event %s in Redis: %w", row.EventID, err)
				break
			}
			done = append(done, row.ID)
		}
		if r.afterEnqueue != nil {
			if err := r.afterEnqueue(); err != nil {
				return err
			}
		}
		if len(done) == 0 {
			return nil
		}
		res := tx.Where("id IN ?", done).Delete(&models.OutboxEvent{})
		if res.Error != nil {
			return fmt.Errorf("delete relayed outbox rows: %w", res.Error)
		}
		moved = int(res.RowsAffected)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if moved > 0 {
		r.cfg.Logger.Debug("outbox relayed", "events", moved)
	}
	return moved, enqueueErr
}

// Drain runs batches until the outbox is empty (or a batch fails) and
// reports how many rows it moved.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := r.RunOnce(ctx)
		total += n
		if err != nil || n < r.cfg.BatchSize || ctx.Err() != nil {
			return total, err
		}
	}
}

// Start runs the relay in the background until Stop: it drains the outbox
// at once, then whenever PostgreSQL notifies a commit and every
// PollInterval in case a notification was missed (or on SQLite, where
// there are none).
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("outbox relay already started")
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.done = make(chan struct{})
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	if r.cfg.ListenURL != "" {
		wg.Go(func() { r.listen(ctx, wake) })
	}
	wg.Go(func() { r.loop(ctx, wake) })
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return nil
}

// Stop stops the relay and waits for a batch in progress to finish.
func (r *Relay) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (r *Relay) loop(ctx context.Context, wake <-chan struct{}) {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	for {
		if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox relay failed; retrying at the next poll", "error", err.Error(), "poll_interval", r.cfg.PollInterval.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-ticker.C:
		}
	}
}

// listen keeps a LISTEN connection open, reconnecting after a pause that
// grows while connecting fails; polling covers the gaps.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	const firstPause = 100 * time.Millisecond
	pause := firstPause
	for ctx.Err() == nil {
		connected, err := r.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		if connected {
			pause = firstPause
		}
		r.cfg.Logger.Warn("outbox relay is not listening for notifications; polling every outbox.poll_interval until it is back",
			"error", err.Error(), "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(pause*2, 30*time.Second)
	}
}

// listenOnce listens on one connection until it fails, and reports whether
// it got as far as listening. It signals wake once listening, since events
// committed while it was away sent notifications nobody heard.
func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}) (bool, error) {
	conn, err := pgx.Connect(ctx, r.cfg.ListenURL)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return false, fmt.Errorf("listen %s: %w", Channel, err)
	}
	signal(wake)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		signal(wake)
	}
}

// signal wakes the loop without blocking: one pending wake-up covers any
// number of notifications, since a drain takes everything committed.
func signal(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
