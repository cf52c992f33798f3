package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/lib/tracing"
	"github.com/homingdev/homing/models"
)

// Defaults of RelayConfig.
const (
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 500
	DefaultRecoverAfter = 30 * time.Second
)

// Why Recover queued an event's task again (its WARN says which).
const (
	// TaskMissing: Redis has no task with the event's TaskID (it lost its
	// data: restart without persistence, FLUSHDB, a failover that dropped
	// writes).
	TaskMissing = "missing"
	// TaskArchived: the event's task was archived (asynq gave up on it, or
	// someone archived it from the monitor); it is deleted and queued
	// afresh, as its TaskID would refuse a new one while it stays.
	TaskArchived = "archived"
)

// RelayConfig says how a Relay finds and paces its work.
type RelayConfig struct {
	// PollInterval (outbox.poll_interval) is how often the relay looks for
	// committed events without being told; DefaultPollInterval when zero.
	PollInterval time.Duration
	// RecoverAfter (outbox.recover_after) is how long after queueing an
	// event not yet fanned out the relay looks at its task in Redis (and
	// again every RecoverAfter after that): a task that is missing (Redis
	// lost its data) or archived is queued again; one still pending,
	// scheduled, retrying or running is left alone, however long the
	// backlog. DefaultRecoverAfter when zero. Too short only costs a Redis
	// lookup per waiting event.
	RecoverAfter time.Duration
	// Inspector reads the state of an event's task for Recover; Recover
	// fails without one (RunOnce and Drain do not need it).
	Inspector *asynq.Inspector
	// BatchSize is the most rows one RunOnce moves (one transaction).
	BatchSize int
	// ListenURL is the PostgreSQL URL the relay LISTENs on for the outbox
	// trigger's notifications; empty (SQLite) means polling only.
	ListenURL string
	// DrainOnStop makes Stop queue what is left in the outbox before it
	// returns (homing serve: what its last requests published is queued now,
	// not at another relay's next poll).
	DrainOnStop bool
	// Database is told of the relay's database errors (nil: none is); an
	// outage is logged once by it, and the relay's own line per poll drops
	// to DEBUG meanwhile.
	Database *dbstate.Watcher
	Logger   *slog.Logger
	Clock    clock.Clock
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
	// onLookup, when set (by tests), runs after Recover looked up the task
	// of an event.
	onLookup func(eventID string)

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
	n, err := r.queue(ctx, func(q *gorm.DB) *gorm.DB { return q.Where("queued_at IS NULL").Order("id") })
	if n > 0 {
		r.cfg.Logger.Debug("outbox relayed", "events", n)
	}
	return n, err
}

// Recover looks, in at most one batch, at the events queued longer than
// RecoverAfter ago and still not fanned out, and queues again those whose
// task Redis no longer holds or holds archived; it reports how many it
// looked at and how many it queued again. The state is asked of Redis, not
// guessed from the time: an event whose task still waits behind a backlog,
// retries or runs is never queued twice, and a lost one moves within
// RecoverAfter plus a quarter of it. Every row looked at is marked queued
// now, so it is looked at again only after another RecoverAfter.
//
// What can happen twice? No row lock is held across Redis round trips:
// the tasks are looked up first, in parallel, then the rows still waiting
// as they were read are locked (SKIP LOCKED) and marked in one short
// transaction, and only then are the lost ones queued. A row fanned out
// meanwhile is gone (the Completer deletes it before its task ends), and
// one another relay (homing serve's, the scheduler's) marked meanwhile has
// a newer queued_at: neither is queued again. A fan-out's release of its
// row (Completer) therefore never waits for a batch's Redis lookups.
func (r *Relay) Recover(ctx context.Context) (looked, requeued int, err error) {
	if r.cfg.Inspector == nil {
		return 0, 0, errors.New("outbox recovery needs an asynq inspector (RelayConfig.Inspector)")
	}
	cutoff := r.cfg.Clock.Now().Add(-r.cfg.RecoverAfter)
	// Served by outbox_events_queued (queued_at) WHERE queued_at IS NOT NULL.
	looked, lost, err := r.recover(ctx, cutoff)
	for _, why := range []string{TaskMissing, TaskArchived} {
		// One line per reason and batch, naming the first events: a Redis
		// that lost its data may have lost thousands.
		var ids []string
		n := 0
		var first time.Time
		for _, l := range lost {
			if l.why != why {
				continue
			}
			if n == 0 {
				first = l.row.CreatedAt
			}
			n++
			if len(ids) < 10 {
				ids = append(ids, l.row.EventID)
			}
		}
		if n == 0 {
			continue
		}
		msg := "outbox events were queued but their tasks are gone from Redis (check that Redis persists, see homing stats; or the homing serve that accepted them stopped before queueing them); queued them again"
		if why == TaskArchived {
			msg = "outbox events' tasks were archived before their fan-out (by asynq after repeated failures, or from the monitor); deleted and queued them again"
		}
		r.cfg.Logger.Warn(msg, "reason", why, "events", n, "event_ids", ids,
			"first_accepted_at", first.UTC().Format(time.RFC3339), "recover_after", r.cfg.RecoverAfter.String())
	}
	return looked, len(lost), err
}

// lost says why the task of row's event must be queued again (TaskMissing,
// TaskArchived), or "" when Redis holds it in a state that will still run
// it. An archived task is deleted first, so that its TaskID lets the new
// one in.
func (r *Relay) lost(row models.OutboxEvent) (string, error) {
	info, err := r.cfg.Inspector.GetTaskInfo(event.Queue, event.TaskID(row.Tenant, row.EventID))
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		return TaskMissing, nil
	case err != nil:
		return "", fmt.Errorf("look up the task of outbox event %s: %w", row.EventID, err)
	case info.State == asynq.TaskStateArchived:
		err := r.cfg.Inspector.DeleteTask(event.Queue, info.ID)
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return "", fmt.Errorf("delete the archived task of outbox event %s: %w", row.EventID, err)
		}
		return TaskArchived, nil
	default:
		return "", nil
	}
}

// requeued is a row Recover queued again, and why.
type requeued struct {
	row models.OutboxEvent
	why string
}

// lookups is how many task look-ups (and re-enqueues) Recover has in
// flight at once: a batch costs a few round trips, not one per row.
const lookups = 32

// recover is one batch of Recover, in three steps so that no row lock is
// held across Redis: read the rows queued before cutoff (no lock) → look up
// their tasks (parallel, no transaction) → lock those still as read (SKIP
// LOCKED, queued_at unchanged) and mark them looked at now, in one short
// transaction → queue again the lost ones among them. It reports how many
// rows it marked looked at and which it queued again. A row marked whose enqueue then
// fails is looked at again after RecoverAfter.
func (r *Relay) recover(ctx context.Context, cutoff time.Time) (int, []requeued, error) {
	var rows []models.OutboxEvent
	// Served by outbox_events_queued (queued_at) WHERE queued_at IS NOT NULL.
	err := r.db.WithContext(ctx).Select("id", "tenant", "event_id", "payload", "created_at", "queued_at", "trace_context").
		Where("queued_at IS NOT NULL AND queued_at < ?", cutoff).Order("queued_at").
		Limit(r.cfg.BatchSize).Find(&rows).Error
	if err != nil {
		return 0, nil, fmt.Errorf("read outbox: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil, nil
	}
	whys := make([]string, len(rows))
	if err := parallel(len(rows), func(i int) error {
		why, err := r.lost(rows[i])
		whys[i] = why
		if r.onLookup != nil {
			r.onLookup(rows[i].EventID)
		}
		return err
	}); err != nil {
		return len(rows), nil, err
	}
	ours, err := r.markLooked(ctx, rows)
	if err != nil {
		return len(rows), nil, err
	}
	var lost []requeued
	for i, row := range rows {
		if whys[i] != "" && ours[row.ID] {
			lost = append(lost, requeued{row, whys[i]})
		}
	}
	var mu sync.Mutex
	var added []requeued
	err = parallel(len(lost), func(i int) error {
		err := relay(ctx, r.client, lost[i].row)
		switch {
		case err == nil:
			mu.Lock()
			added = append(added, lost[i])
			mu.Unlock()
		case errors.Is(err, asynq.ErrTaskIDConflict):
			// Queued since it was looked up (a republish): in Redis.
		default:
			return fmt.Errorf("queue outbox event %s in Redis: %w", lost[i].row.EventID, err)
		}
		return nil
	})
	slices.SortFunc(added, func(a, b requeued) int { return a.row.QueuedAt.Compare(*b.row.QueuedAt) })
	return len(ours), added, err
}

// markLooked marks, in one short transaction, those of rows still waiting
// as they were read (not fanned out, not marked by another relay since)
// looked at now, and reports which.
func (r *Relay) markLooked(ctx context.Context, rows []models.OutboxEvent) (map[int64]bool, error) {
	ours := make(map[int64]bool, len(rows))
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		clear(ours)
		var mine []models.OutboxEvent
		// Served by the primary key.
		q := tx.Select("id", "queued_at").Where("id IN ?", ids(rows))
		if tx.Dialector.Name() == "postgres" { // SQLite has no row locks: it serialises writers
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		if err := q.Find(&mine).Error; err != nil {
			return fmt.Errorf("lock outbox rows: %w", err)
		}
		read := make(map[int64]time.Time, len(rows))
		for _, row := range rows {
			read[row.ID] = *row.QueuedAt
		}
		done := make([]int64, 0, len(mine))
		for _, m := range mine {
			if m.QueuedAt != nil && m.QueuedAt.Equal(read[m.ID]) {
				ours[m.ID] = true
				done = append(done, m.ID)
			}
		}
		if len(done) == 0 {
			return nil
		}
		now := r.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
		if err := tx.Model(&models.OutboxEvent{}).Where("id IN ?", done).Update("queued_at", now).Error; err != nil {
			return fmt.Errorf("mark outbox rows looked at: %w", err)
		}
		return nil
	})
	return ours, err
}

func ids(rows []models.OutboxEvent) []int64 {
	out := make([]int64, len(rows))
	for i, row := range rows {
		out[i] = row.ID
	}
	return out
}

// parallel runs fn(0) … fn(n-1), at most lookups at once, and returns the
// first error.
func parallel(n int, fn func(i int) error) error {
	sem := make(chan struct{}, lookups)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// queue enqueues one batch of the rows where selects, locked, and marks those
// it enqueued (or found already in Redis) queued now, in one statement. It
// reports how many rows it marked.
func (r *Relay) queue(ctx context.Context, where func(*gorm.DB) *gorm.DB) (int, error) {
	marked := 0
	var enqueueErr error
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []models.OutboxEvent
		q := where(tx.Select("id", "tenant", "event_id", "payload", "created_at", "trace_context")).Limit(r.cfg.BatchSize)
		if tx.Dialector.Name() == "postgres" { // SQLite has no row locks: it serialises writers
			// Another relay's batch is skipped, not waited for.
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		done := make([]int64, 0, len(rows))
		for _, row := range rows {
			err := relay(ctx, r.client, row)
			switch {
			case err == nil:
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
		return 0, err
	}
	return marked, enqueueErr
}

// relay queues row's fan-out task, in a span of its own (homing.relay, a
// producer under the publish's span that row.TraceContext names) whose
// trace context the task carries; with tracing off here, the row's is
// carried unchanged.
func relay(ctx context.Context, client *asynq.Client, row models.OutboxEvent) error {
	var stored tracing.Context
	if row.TraceContext != nil {
		stored = *row.TraceContext
	}
	ctx, span := tracing.Start(ctx, "homing.relay", trace.SpanKindProducer, stored, "")
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("homing.event_id", row.EventID), attribute.String("homing.tenant", row.Tenant))
	}
	_, err := client.EnqueueContext(ctx, event.OutboxTask(row.Tenant, row.EventID, []byte(row.Payload), row.CreatedAt, row.ID, tracing.Current(ctx, stored)))
	return err
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
	// whose task Redis lost is queued again at most 1.25 × RecoverAfter
	// after it was queued (or last looked at).
	recoverTicker := time.NewTicker(max(r.cfg.RecoverAfter/4, r.cfg.PollInterval))
	defer recoverTicker.Stop()
	recoverNow := true
	for {
		if recoverNow {
			if _, err := r.RecoverAll(ctx); err != nil && ctx.Err() == nil {
				r.logFailure(err, "outbox recovery failed; retrying soon", "error", err.Error())
			}
			recoverNow = false
		}
		if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.logFailure(err, "outbox relay failed; retrying at the next poll", "error", err.Error(), "poll_interval", r.cfg.PollInterval.String())
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

// logFailure logs one of the loop's failures at WARN, or at DEBUG when it
// is a database outage, which RelayConfig.Database logs once.
func (r *Relay) logFailure(err error, msg string, attrs ...any) {
	if r.cfg.Database != nil && r.cfg.Database.Observe(err).Outage() {
		r.cfg.Logger.Debug(msg, attrs...)
		return
	}
	r.cfg.Logger.Warn(msg, attrs...)
}

// RecoverAll runs Recover until a batch comes back short (or fails) and
// reports how many events it queued again.
func (r *Relay) RecoverAll(ctx context.Context) (int, error) {
	total := 0
	for {
		looked, n, err := r.Recover(ctx)
		total += n
		if err != nil || ctx.Err() != nil || looked < r.cfg.BatchSize {
			return total, err
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
		r.logFailure(err, "outbox relay is not listening for notifications; polling every outbox.poll_interval until it is back",
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
