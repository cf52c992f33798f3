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

	"github.com/homingdev/homing/clock"
	"github.com/homingdev/homing/event"
	"github.com/homingdev/homing/models"
)

// Defaults of RelayConfig.
const (
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 500
	DefaultRecoverAfter = 5 * time.Minute
)

// RelayConfig says how a Relay finds and paces its work.
type RelayConfig struct {
	// PollInterval (outbox.poll_interval) is how often the relay looks for
	// committed events without being told; DefaultPollInterval when zero.
	PollInterval time.Duration
	// RecoverAfter (outbox.recover_after) is how long an event may stay
	// queued in Redis without being fanned out before the relay queues it
	// again: its task was lost (Redis restarted without persistence, was
	// flushed, or failed over and dropped writes). DefaultRecoverAfter when
	// zero. Too short only costs a refused enqueue per waiting event.
	RecoverAfter time.Duration
	// BatchSize is the most rows one RunOnce moves (one transaction).
	BatchSize int
	// ListenURL is the PostgreSQL URL the relay LISTENs on for the outbox
	// trigger's notifications; empty (SQLite) means polling only.
	ListenURL string
	// DrainOnStop makes Stop queue what is left in the outbox before it
	// returns (homing serve: what its last requests published is queued now,
	// not at another relay's next poll).
	DrainOnStop bool
	Logger      *slog.Logger
	Clock       clock.Clock
}

// Relay moves committed outbox rows into asynq as webhook:event tasks with
// TaskID webhook_event::<event id>, and marks each row queued only once its
// enqueue succeeded; the row itself stays until the event is fanned out
// (Completer). Several relays may run at once (scheduler, homing serve, a
// starting worker): on PostgreSQL each locks its batch with SKIP LOCKED, so
// they share the work instead of repeating it.
type Relay struct {
	db     *gorm.DB
	client *asynq.Client
	cfg    RelayConfig

	// afterEnqueue, when set (by tests), runs after a batch is enqueued and
	// before its rows are marked queued; an error makes RunOnce stop there,
	// as a crash would: the transaction rolls back and the rows stay
	// unqueued.
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
	if cfg.RecoverAfter <= 0 {
		cfg.RecoverAfter = DefaultRecoverAfter
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Relay{db: db, client: client, cfg: cfg}
}

// RunOnce queues at most one batch of committed events not queued yet,
// oldest first, and reports how many it marked queued. Rows whose enqueue
// succeeded are marked even when a later enqueue in the batch failed; that
// failure is returned and the remaining rows wait for the next run.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	// Served by outbox_events_unqueued (id) WHERE queued_at IS NULL.
	n, _, err := r.queue(ctx, func(q *gorm.DB) *gorm.DB { return q.Where("queued_at IS NULL").Order("id") })
	if n > 0 {
		r.cfg.Logger.Debug("outbox relayed", "events", n)
	}
	return n, err
}

// Recover queues again, at most one batch, the events queued longer than
// RecoverAfter ago and still not fanned out, and reports how many tasks it
// put back into Redis. An event whose task is still in Redis (waiting
// behind a backlog, retrying, or archived) is refused by its TaskID and
// left to it; either way the row is looked at again after RecoverAfter.
func (r *Relay) Recover(ctx context.Context) (int, error) {
	cutoff := r.cfg.Clock.Now().Add(-r.cfg.RecoverAfter)
	// Served by outbox_events_queued (queued_at) WHERE queued_at IS NOT NULL.
	_, lost, err := r.queue(ctx, func(q *gorm.DB) *gorm.DB {
		return q.Where("queued_at IS NOT NULL AND queued_at < ?", cutoff).Order("queued_at")
	})
	if len(lost) > 0 {
		// One line per batch, naming the first events: a Redis that lost
		// its data may have lost thousands.
		ids := make([]string, 0, min(len(lost), 10))
		for _, row := range lost[:min(len(lost), 10)] {
			ids = append(ids, row.EventID)
		}
		r.cfg.Logger.Warn("outbox events were queued but never fanned out (their tasks were lost from Redis: check that Redis persists, see homing stats); queued them again",
			"events", len(lost), "event_ids", ids, "first_accepted_at", lost[0].CreatedAt.UTC().Format(time.RFC3339), "recover_after", r.cfg.RecoverAfter.String())
	}
	return len(lost), err
}

// queue enqueues one batch of the rows where selects, locked, and marks those
// it enqueued (or found already in Redis) queued now, in one statement. It
// reports how many rows it marked and which of them were newly put into
// Redis (not refused as already there).
func (r *Relay) queue(ctx context.Context, where func(*gorm.DB) *gorm.DB) (int, []models.OutboxEvent, error) {
	marked := 0
	var added []models.OutboxEvent
	var enqueueErr error
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		added = added[:0]
		var rows []models.OutboxEvent
		q := where(tx.Select("id", "event_id", "payload", "created_at")).Limit(r.cfg.BatchSize)
		if tx.Dialector.Name() == "postgres" { // SQLite has no row locks: it serialises writers
			// Another relay's batch is skipped, not waited for.
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		done := make([]int64, 0, len(rows))
		for _, row := range rows {
			_, err := r.client.EnqueueContext(ctx, event.OutboxTask(row.EventID, []byte(row.Payload)))
			switch {
			case err == nil:
				added = append(added, row)
			case errors.Is(err, asynq.ErrTaskIDConflict):
				// The event's task is already in Redis: an earlier run
				// enqueued it and died before marking the row, or it waits.
			default:
				enqueueErr = fmt.Errorf("queue outbox event %s in Redis: %w", row.EventID, err)
			}
			if enqueueErr != nil {
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
		now := r.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
		res := tx.Model(&models.OutboxEvent{}).Where("id IN ?", done).Update("queued_at", now)
		if res.Error != nil {
			return fmt.Errorf("mark relayed outbox rows queued: %w", res.Error)
		}
		marked = int(res.RowsAffected)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return marked, added, enqueueErr
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

// Stop stops the relay and waits, up to ctx, for a batch in progress to
// finish. With RelayConfig.DrainOnStop it then moves what is left in the
// outbox into Redis, within ctx too.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop outbox relay: %w", ctx.Err())
	}
	if !r.cfg.DrainOnStop {
		return nil
	}
	if _, err := r.Drain(ctx); err != nil {
		r.cfg.Logger.Warn("outbox not drained at stop; another relay (the scheduler's) will queue the rest", "error", err.Error())
	}
	return nil
}

func (r *Relay) loop(ctx context.Context, wake <-chan struct{}) {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	// Lost tasks are looked for four times per RecoverAfter, so an event
	// lost with Redis's data is queued again at most 1.25 × RecoverAfter
	// after it was queued.
	recoverTicker := time.NewTicker(max(r.cfg.RecoverAfter/4, r.cfg.PollInterval))
	defer recoverTicker.Stop()
	recoverNow := true
	for {
		if recoverNow {
			if _, err := r.RecoverAll(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Warn("outbox recovery failed; retrying soon", "error", err.Error())
			}
			recoverNow = false
		}
		if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox relay failed; retrying at the next poll", "error", err.Error(), "poll_interval", r.cfg.PollInterval.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-ticker.C:
		case <-recoverTicker.C:
			recoverNow = true
		}
	}
}

// RecoverAll runs Recover until a batch comes back short (or fails) and
// reports how many events it queued again.
func (r *Relay) RecoverAll(ctx context.Context) (int, error) {
	total := 0
	for {
		before := total
		n, err := r.Recover(ctx)
		total += n
		if err != nil || ctx.Err() != nil {
			return total, err
		}
		// Recover reports re-added tasks only; a full batch of rows still
		// in Redis also ends the round, as the next tick comes soon.
		if total-before < r.cfg.BatchSize {
			return total, nil
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
