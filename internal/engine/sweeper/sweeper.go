// Package sweeper finds deliveries whose retry has come due and enqueues a
// retry task for each. It never sends anything itself, so a step takes
// milliseconds however slow the receivers are.
//
// A tick (Tick) is a run of steps (RunOnce). A step takes at most
// sweeper.batch_size due rows, shared out tenant by tenant and, within a
// tenant, webhook by webhook, so that one tenant's or one webhook's backlog
// never starves another's, marks them queued and enqueues
// their retries with TaskID webhook_retry::<delivery id>. The tick keeps
// stepping while due rows remain and each retry queue holds fewer than
// sweeper.max_pending pending tasks, waiting for the workers when a queue is
// full: the retry path drains at the workers' speed, and the queues stay
// short enough that a new retry never waits behind a whole backlog.
//
// While a webhook is failing (models.WebhookHealth.Failing), a step takes
// one of its rows as the webhook's probe and records it, then waits a gap
// that grows with the outage (ProbeGap: 1, 2, 4, 8 s … up to
// health.probe_interval) before the next; its other rows stay due, and a
// claim refuses to send them (internal/engine/dispatch/storage notHeld) until a success
// clears the failure. A
// webhook with a rate_limit gets at most rate_limit × tick rows a tick,
// spread over the tick from the step's time with asynq's ProcessAt.
package sweeper

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/opsevent"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/asynqinfo"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/lib/tracing"
	"github.com/homingdev/homing/models"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// enqueuers is how many retry tasks a step queues at once.
const enqueuers = 8

// DefaultBatchSize caps one step.
const DefaultBatchSize = 500

// DefaultProbeInterval is the longest gap between probes of a failing
// webhook (ProbeGap).
const DefaultProbeInterval = 10 * time.Second

// minPerWebhook is the fewest rows a step may take of one webhook, however
// many webhooks share the batch.
const minPerWebhook = 32

// pollFull is how long a tick waits before it looks again at a full queue
// or at a webhook it is probing.
const pollFull = 50 * time.Millisecond

// Config wires a Sweeper.
type Config struct {
	BatchSize int
	// MaxPending is the high-water mark of each retry queue: a tick stops
	// adding to a queue holding this many pending tasks. Zero is
	// BatchSize.
	MaxPending int
	// Interval is sweeper.interval: how often ticks come. A tick's queued
	// mark lasts twice that (at least a minute): a row whose task was lost
	// is taken again once its mark is older.
	Interval time.Duration
	// ProbeInterval (health.probe_interval) is the longest a failing
	// webhook waits between probes, once its gaps have grown (ProbeGap).
	ProbeInterval time.Duration
	Clock         clock.Clock
	Logger        *slog.Logger
	// NewTask builds the retry task of a delivery (tasks.NewSweptRetryTask),
	// carrying sweep, the trace context of the tick's span ("" when this
	// process does not trace), for the retry's span to link to.
	NewTask func(deliveryID, webhook, queue string, sweep tracing.Context) *asynq.Task
	// TaskID names that task (tasks.RetryTaskID): the concurrency guard.
	TaskID func(deliveryID string) string
	// Observer is told of every tick, for metrics; nil is none.
	Observer Observer
	// StepTimeout bounds a step's writes and enqueues once its rows are
	// read (transport time: the wall clock); zero is DefaultStepTimeout.
	// Tests that enqueue thousands of retries in one step on a loaded
	// machine put it out of reach.
	StepTimeout time.Duration
	// Ops, when set, is told at the start of every tick to publish the
	// health changes no attempt announced (opsevent.Publisher.Reconcile):
	// a process that stopped between recording and announcing, a
	// recovery by a first attempt.
	Ops *opsevent.Publisher
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
	selectDue string
	// probeDue is the dialect's ProbeDue over webhook_health h.
	probeDue string
}

// New builds a Sweeper.
func New(db *gorm.DB, client *asynq.Client, inspector *asynq.Inspector, cfg Config) *Sweeper {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = cfg.BatchSize
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = DefaultStepTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sel, due := selectDueSQLite, probeDueSQLite
	if store.DialectOf(db) == store.Postgres {
		sel, due = selectDuePostgres, probeDuePostgres
	}
	return &Sweeper{db: db, client: client, inspector: inspector, cfg: cfg, selectDue: sel, probeDue: due}
}

// Result counts what a step or a tick did.
type Result struct {
	// Due is how many due rows were taken (at most the batch size a step).
	Due int
	// Enqueued is how many retry tasks were queued.
	Enqueued int
	// InHand is how many already had a retry task pending, scheduled,
	// active or waiting in asynq's retry set.
	InHand int
	// Revived is how many had a dead task (archived or completed) holding
	// their TaskID, which was deleted and replaced.
	Revived int
	// Busy is how many had their TaskID held by a task still active: a
	// task that has claimed the row already (the row is due again after
	// a failed attempt, a refusal or a release) and will not claim it
	// again. They are handed back, to be queued by a step after that task
	// ends.
	Busy int
	// Probes is how many rows were taken as a failing webhook's probe.
	Probes int
	// Steps is how many steps ran.
	Steps int
	// more is set when a step may have left due rows it had no room for.
	more bool
}

func (r *Result) add(o Result) {
	r.Due += o.Due
	r.Enqueued += o.Enqueued
	r.InHand += o.InHand
	r.Revived += o.Revived
	r.Busy += o.Busy
	r.Probes += o.Probes
	r.Steps += o.Steps
}

// dueRow is one row a step took.
type dueRow struct {
	ID          string
	WebhookID   string
	WebhookName string
	Queue       string
	RateLimit   int
	Probe       bool
}

// selectDuePostgres takes, webhook by webhook, each one's oldest due Failed
// rows not queued since @stale: up to @per each, one while failing and its
// probe is due (probeDuePostgres: ProbeGap after its last), none on a full queue
// (@full) or past its rate quota (@spent); then the batch (@batch) in
// round-robin order across tenants first (each tenant's first row, then
// each one's second …) and, within a tenant, across its webhooks (its
// webhooks' first rows, then their second …): a tenant with many webhooks
// and a deep backlog takes no more of a step than a tenant with one, so
// it cannot hold another tenant's due retries past the step. The tenant
// comes from the webhooks row, so no index on the tenant is read. A
// disabled tenant's webhooks are left out whole (the join to tenants, by
// its primary key), before any of their rows is read: its deliveries stay
// due, held until it is enabled again, and its failing webhooks get no
// probe. Served by webhooks' primary key, tenants' and, per webhook,
// deliveries_due_webhook (webhook_id, next_retry) WHERE status = 'Failed':
// an index range read per webhook, whatever the size of the table. The
// lateral's LIMIT is a plain parameter, which the planner can cost (a
// LIMIT it cannot read made it sort every row of the webhook); each
// webhook's quota is applied to the numbered rows outside.
const selectDuePostgres = `SELECT p.id, w.id AS webhook_id, p.webhook_name, w.queue, w.rate_limit,
	w.enabled AND COALESCE(h.failures, 0) >= @failing AS probe
FROM webhooks w
JOIN tenants t ON t.name = w.tenant AND t.enabled
LEFT JOIN webhook_health h ON h.webhook_id = w.id
CROSS JOIN LATERAL (
	SELECT d.id, d.webhook_name, d.next_retry, row_number() OVER (ORDER BY d.next_retry) AS rn
	FROM deliveries d
	WHERE d.webhook_id = w.id AND d.status = 'Failed' AND d.next_retry <= @now
		AND (d.queued_at IS NULL OR d.queued_at <= @stale)
	ORDER BY d.next_retry
	LIMIT @per
) p
WHERE p.rn <= CASE
	WHEN w.queue = ANY(CAST(@full AS text[])) OR w.id = ANY(CAST(@spent AS text[])) THEN 0
	WHEN NOT w.enabled THEN @per
	WHEN COALESCE(h.failures, 0) >= @failing THEN
		CASE WHEN ` + probeDuePostgres + ` THEN 1 ELSE 0 END
	WHEN w.rate_limit > 0 THEN LEAST(@per, w.rate_limit * @tick_seconds)
	ELSE @per END
ORDER BY row_number() OVER (PARTITION BY w.tenant ORDER BY p.rn, p.next_retry), p.next_retry
LIMIT @batch`

// SelectDuePostgres is a step's query on PostgreSQL, with GORM's @named
// parameters, for the benchmark's EXPLAIN.
const SelectDuePostgres = selectDuePostgres

// selectDueSQLite is selectDuePostgres for SQLite, which has no LATERAL:
// the due rows are numbered per webhook by a window. It reads every due
// row; SQLite serves one process, not a fleet's backlog.
const selectDueSQLite = `SELECT id, webhook_id, webhook_name, queue, rate_limit, probe FROM (
SELECT id, webhook_id, webhook_name, queue, rate_limit, probe, next_retry,
	row_number() OVER (PARTITION BY tenant ORDER BY rn, next_retry) AS trn FROM (
	SELECT d.id, w.id AS webhook_id, w.tenant, d.webhook_name, w.queue, w.rate_limit, d.next_retry,
		w.enabled AND COALESCE(h.failures, 0) >= @failing AS probe,
		CASE
			WHEN w.queue IN @full OR w.id IN @spent THEN 0
			WHEN NOT w.enabled THEN @per
			WHEN COALESCE(h.failures, 0) >= @failing THEN
				CASE WHEN ` + probeDueSQLite + ` THEN 1 ELSE 0 END
			WHEN w.rate_limit > 0 THEN MIN(@per, w.rate_limit * @tick_seconds)
			ELSE @per END AS quota,
		row_number() OVER (PARTITION BY d.webhook_id ORDER BY d.next_retry) AS rn
	FROM deliveries d
	JOIN webhooks w ON w.id = d.webhook_id
	JOIN tenants t ON t.name = w.tenant AND t.enabled
	LEFT JOIN webhook_health h ON h.webhook_id = w.id
	WHERE d.status = 'Failed' AND d.next_retry <= @now AND (d.queued_at IS NULL OR d.queued_at <= @stale)
) WHERE rn <= quota
) ORDER BY trn, next_retry
LIMIT @batch`

// step is what a tick passes to each of its steps.
type step struct {
	now time.Time
	// full are queues at their high-water mark; spent are webhooks past
	// their rate quota for this tick.
	full, spent []string
	// taken counts rows taken this tick per rate-limited webhook, to
	// spread their retries over the tick.
	taken map[string]int
	// per is each webhook's share of a step, set by the tick's first step.
	per int
}

// RunOnce runs one step alone: take at most a batch of due rows, fairly
// across webhooks, and enqueue their retries.
func (s *Sweeper) RunOnce(ctx context.Context) (Result, error) {
	start := s.cfg.Clock.Now()
	res, _, err := s.step(ctx, &step{now: start.UTC(), taken: map[string]int{}})
	if s.cfg.Observer != nil {
		s.cfg.Observer.Sweep(s.cfg.Clock.Now().Sub(start), res.Enqueued)
	}
	return res, err
}

// Tick steps until no due row is left that a queue has room for, or until
// its budget (TickBudget, less than one interval, so ticks do not overlap)
// has passed on the sweeper's clock, or ctx ends (the sweep task's
// deadline is the same budget on the wall clock, which also bounds its
// queries). When every queue that has due rows is full it waits for the
// workers to make room; it waits, and measures its budget, on the
// sweeper's clock only.
func (s *Sweeper) Tick(ctx context.Context) (Result, error) {
	// One span a tick, each the root of a trace of its own; the retries
	// it queues link to it (NewTask's sweep).
	ctx, span := tracing.Start(ctx, "homing.sweep", trace.SpanKindInternal, "", "")
	res, err := s.tick(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("homing.due", res.Due), attribute.Int("homing.enqueued", res.Enqueued), attribute.Int("homing.steps", res.Steps))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	return res, err
}

func (s *Sweeper) tick(ctx context.Context) (Result, error) {
	start := s.cfg.Clock.Now()
	end := start.Add(s.tickBudget())
	if deadline, ok := ctx.Deadline(); ok && start.Add(time.Until(deadline)).Before(end) {
		end = start.Add(time.Until(deadline))
	}
	if n, err := s.cfg.Ops.Reconcile(ctx, s.db, start.UTC()); err != nil {
		s.cfg.Logger.Warn("operational events not published; the next tick tries again", "error", err.Error())
	} else if n > 0 {
		s.cfg.Logger.Info("operational events published for health changes no attempt announced", "webhooks", n)
	}
	var total Result
	st := &step{taken: map[string]int{}}
	var (
		err error
		// probing is set once the tick chose a probe, or found one
		// coming due before it ends: it then stays to the end of its
		// budget, looking again every poll, so that the next probe goes
		// out on time and a probe's success releases the webhook's
		// backlog at once rather than at the next tick.
		probing bool
	)
	for ctx.Err() == nil {
		st.now = s.cfg.Clock.Now().UTC()
		if !st.now.Before(end) {
			break // the budget, on the sweeper's clock
		}
		var (
			r       Result
			touched map[string]bool
		)
		// A step that left out full queues may have left their rows due.
		wasFull := len(st.full) > 0
		r, touched, err = s.step(ctx, st)
		total.add(r)
		if err != nil {
			break
		}
		for _, q := range st.full {
			touched[q] = true
		}
		if st.full, err = s.fullQueues(touched); err != nil {
			break
		}
		probing = probing || r.Probes > 0
		if !r.more && !wasFull && len(st.full) == 0 && !probing {
			// Nothing more is due now. A retry that comes due before
			// the tick ends (a short retry.schedule) is waited for:
			// left to the next tick, it would wait up to
			// sweeper.interval.
			var next time.Time
			if next, err = s.nextRetryBefore(ctx, st, end); err != nil {
				break
			}
			if !next.IsZero() {
				s.sleep(ctx, next.Sub(st.now), st.now, end)
				continue
			}
			// A failing webhook whose next probe comes due before the
			// tick ends keeps it looking, for the same reason.
			var wait bool
			if wait, err = s.nextProbeBefore(ctx, st.now, end); err != nil || !wait {
				break
			}
			probing = true
		}
		if r.Due == 0 || r.Due == r.Busy || (len(st.full) > 0 && len(st.full) == len(touched)) || (probing && !r.more) {
			// Everything left waits for a full queue, a probe or active
			// tasks: give the workers time, then look again.
			s.sleep(ctx, pollFull, st.now, end)
		}
	}
	if err != nil && budgetEnded(ctx) {
		// The budget ended mid-step, which each driver reports its own
		// way (the context's deadline, an i/o timeout, SQLite's
		// "interrupted"): the next tick goes on.
		err = nil
	}
	if total.Due > 0 {
		s.cfg.Logger.Info("sweep", "due", total.Due, "enqueued", total.Enqueued, "in_hand", total.InHand,
			"revived", total.Revived, "busy", total.Busy, "probes", total.Probes, "steps", total.Steps)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Sweep(s.cfg.Clock.Now().Sub(start), total.Enqueued)
	}
	return total, err
}

// sleep waits d on the sweeper's clock, never past the tick's end, or until
// ctx ends: a test with a stub clock moves the tick on by advancing it.
func (s *Sweeper) sleep(ctx context.Context, d time.Duration, now, end time.Time) {
	_ = s.cfg.Clock.Sleep(ctx, min(d, end.Sub(now)))
}

// budgetEnded reports whether ctx has ended or its deadline has passed. A
// driver's own deadline (a dial's or a socket's, taken from ctx's) can fire
// a moment before ctx's timer marks it done, so the deadline is read too;
// it is wall-clock time, as a context's deadline always is.
func budgetEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) <= 0
}

// fullQueues reports which of queues hold at least MaxPending pending
// tasks. A queue asynq has never seen holds none.
func (s *Sweeper) fullQueues(queues map[string]bool) ([]string, error) {
	var full []string
	for q := range queues {
		info, err := asynqinfo.QueueInfo(s.inspector, q)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read depth of queue %s: %w", q, err)
		case info == nil:
			continue // lost with Redis's data, or never seen: empty
		}
		if info.Pending >= s.cfg.MaxPending {
			full = append(full, q)
		}
	}
	return full, nil
}

// DefaultStepTimeout bounds the part of a step after its rows are marked
// queued (Config.StepTimeout).
const DefaultStepTimeout = 10 * time.Second

// step takes one batch and enqueues its retries, reporting the queues it
// enqueued to.
//
// Once it has read its rows, a step finishes them whatever ctx (the tick's
// budget) says: each row ends the step with its retry task queued or its
// mark handed back (unmark), never marked without a task, which would keep
// it out of every step for the mark's lease (queuedLease, a minute). pgx
// answers a context that ends by closing the connection, not by cancelling
// the statement, so a mark cut by the budget still commits on the server
// while the step sees an error (the drain stall of issue 27:
// TestBudgetEndingDuringTheMarkLeavesNoRowMarkedWithoutATask). So the
// writes (probe choice, mark) and the enqueues run on fin, detached from ctx
// and bounded by Config.StepTimeout: a tick may overrun its budget by one step's
// writes and enqueues (milliseconds), which two ticks at once already allow
// (the marks keep them apart).
func (s *Sweeper) step(ctx context.Context, st *step) (Result, map[string]bool, error) {
	fin, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StepTimeout)
	defer cancel()
	rows, more, err := s.take(ctx, fin, st)
	ctx = fin
	if err != nil {
		return Result{Steps: 1}, map[string]bool{}, err
	}
	res := Result{Due: len(rows), Steps: 1, more: more}
	touched := make(map[string]bool)
	tick := s.tickBudget()
	var (
		mu     sync.Mutex
		errs   []error
		failed []string
		wg     sync.WaitGroup
		next   = make(chan queued)
	)
	for range min(enqueuers, len(rows)) {
		wg.Go(func() {
			for q := range next {
				outcome, err := s.enqueue(ctx, q)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
					failed = append(failed, q.row.ID)
				case outcome == enqueued:
					res.Enqueued++
				case outcome == inHand:
					res.InHand++
				case outcome == revived:
					res.Enqueued++
					res.Revived++
				case outcome == busy:
					res.Busy++
					failed = append(failed, q.row.ID)
				}
				mu.Unlock()
			}
		})
	}
	var spent []string
	for i, r := range rows {
		mu.Lock()
		stop := len(errs) > 0
		mu.Unlock()
		if stop {
			// Stop at the first failure, as a sequential step would; the
			// rows not tried are handed back below. The enqueuers still
			// append to failed until wg.Wait.
			mu.Lock()
			for _, r := range rows[i:] {
				failed = append(failed, r.ID)
			}
			mu.Unlock()
			break
		}
		touched[r.Queue] = true
		q := queued{row: r}
		if r.Probe {
			res.Probes++
		}
		if r.RateLimit > 0 {
			// Spread the webhook's retries over the tick at its rate.
			k := st.taken[r.WebhookID]
			st.taken[r.WebhookID] = k + 1
			if k > 0 {
				q.at = st.now.Add(time.Duration(k) * time.Second / time.Duration(r.RateLimit))
			}
			if k+1 >= r.RateLimit*int(tick/time.Second) {
				spent = append(spent, r.WebhookID)
			}
		}
		next <- q
	}
	close(next)
	wg.Wait()
	st.spent = append(st.spent, spent...)
	if len(failed) > 0 {
		s.unmark(failed)
	}
	if len(errs) > 0 {
		return res, touched, errs[0]
	}
	return res, touched, nil
}

// take selects a step's rows (on ctx), makes the failing webhooks' rows
// their probes, and marks the rows queued, so that the next step does not
// read them again (on fin: see step).
func (s *Sweeper) take(ctx, fin context.Context, st *step) ([]dueRow, bool, error) {
	tick := s.tickBudget()
	args := s.probeArgs(st.now)
	args["now"] = st.now
	args["stale"] = st.now.Add(-s.queuedLease())
	args["failing"] = models.FailingAfter
	args["tick_seconds"] = max(1, int(tick/time.Second))
	args["batch"] = s.cfg.BatchSize
	args["full"] = st.full
	args["spent"] = st.spent
	// Each webhook's share of a batch, so that a step with many webhooks
	// due reads about a batch of index entries, not one per webhook and
	// row. Counted once a tick.
	if st.per == 0 {
		var webhooks int64
		if err := s.db.WithContext(ctx).Model(&models.Webhook{}).Count(&webhooks).Error; err != nil {
			return nil, false, fmt.Errorf("count webhooks: %w", err)
		}
		st.per = max(minPerWebhook, s.cfg.BatchSize/max(1, int(webhooks)))
	}
	per := st.per
	args["per"] = per
	if s.selectDue == selectDuePostgres {
		args["full"], args["spent"] = pgArray(st.full), pgArray(st.spent)
	} else {
		if len(st.full) == 0 {
			args["full"] = []string{""}
		}
		if len(st.spent) == 0 {
			args["spent"] = []string{""}
		}
	}
	var rows []dueRow
	if err := s.selectRows(ctx, args, &rows); err != nil {
		return nil, false, fmt.Errorf("select due deliveries: %w", err)
	}
	// More may be due when the batch is full, or when a webhook filled its
	// share of it.
	more := len(rows) >= s.cfg.BatchSize
	perWebhook := make(map[string]int)
	for _, r := range rows {
		perWebhook[r.WebhookID]++
		if perWebhook[r.WebhookID] >= per {
			more = true
		}
	}
	out := rows[:0]
	var ids []string
	for _, r := range rows {
		if r.Queue == "" {
			r.Queue = "default"
		}
		if r.Probe {
			ok, err := s.chooseProbe(fin, r, st.now)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, r)
		ids = append(ids, r.ID)
	}
	if len(ids) > 0 {
		// Served by the primary key.
		if err := s.db.WithContext(fin).Model(&models.Delivery{}).Where("id IN ? AND status = ?", ids, models.StatusFailed).
			Update("queued_at", st.now).Error; err != nil {
			// The mark may have committed all the same (a connection lost
			// after the statement was sent): hand the rows back.
			s.unmark(ids)
			return nil, false, fmt.Errorf("mark due deliveries queued: %w", err)
		}
	}
	return out, more, nil
}

// selectRows runs the step's query. On PostgreSQL it runs without JIT: the
// planner's estimate for a LATERAL over a webhooks table with stale
// statistics can pass jit_above_cost, and compiling then costs a hundred
// times the index reads the step makes.
func (s *Sweeper) selectRows(ctx context.Context, args map[string]any, rows *[]dueRow) error {
	if s.selectDue != selectDuePostgres {
		return s.db.WithContext(ctx).Raw(s.selectDue, args).Scan(rows).Error
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL jit = off").Error; err != nil {
			return err
		}
		return tx.Raw(s.selectDue, args).Scan(rows).Error
	})
}

// chooseProbe records r as its failing webhook's probe, unless another
// sweep chose one since (two schedulers): the update re-checks ProbeDue on
// the row it writes, and a probe chosen at now is not due again before
// FirstProbeGap, so of two sweeps racing for one webhook one wins. Served
// by webhook_health's primary key.
func (s *Sweeper) chooseProbe(ctx context.Context, r dueRow, now time.Time) (bool, error) {
	args := s.probeArgs(now)
	args["webhook"], args["failing"], args["probe"], args["now"] = r.WebhookID, models.FailingAfter, r.ID, now
	res := s.db.WithContext(ctx).Exec(`UPDATE webhook_health AS h SET probe_id = @probe, probe_at = @now
		WHERE h.webhook_id = @webhook AND h.failures >= @failing AND `+s.probeDue, args)
	if res.Error != nil {
		return false, fmt.Errorf("choose probe of webhook %q: %w", r.WebhookName, res.Error)
	}
	if res.RowsAffected == 1 {
		s.cfg.Logger.Info("probing failing webhook", "webhook", r.WebhookName, "delivery", r.ID)
	}
	return res.RowsAffected == 1, nil
}

// unmark hands rows whose retry could not be queued back to the next step
// at once, instead of after their mark's lease. Best effort: the lease
// heals them anyway.
func (s *Sweeper) unmark(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("id IN ?", ids).Update("queued_at", nil).Error; err != nil {
		s.cfg.Logger.Warn("could not hand back unqueued retries; they are swept again after their lease", "count", len(ids), "error", err.Error())
	}
}

// tickBudget is how long a tick may run: less than the interval, so that
// ticks follow each other instead of overlapping, and inside the sweep
// task's one-minute timeout.
func (s *Sweeper) tickBudget() time.Duration {
	return max(time.Second, min(s.cfg.Interval, 50*time.Second)*9/10)
}

// TickBudget is tickBudget for the task that runs Tick.
func (s *Sweeper) TickBudget() time.Duration { return s.tickBudget() }

// queuedLease is how long a queued mark keeps a row out of the steps.
func (s *Sweeper) queuedLease() time.Duration {
	return max(time.Minute, 2*s.cfg.Interval)
}

// pgArray passes a string list as a PostgreSQL text[] (never NULL, so ANY
// of an empty list is false).
func pgArray(v []string) any {
	if v == nil {
		v = []string{}
	}
	return stringArray(v)
}

type enqueueOutcome int

const (
	enqueued enqueueOutcome = iota
	inHand
	revived
	busy
)

// queued is one retry to enqueue, to be processed at at (by the
// sweeper's clock) when its webhook's rate limit spreads it over the tick;
// a zero at is at once.
type queued struct {
	row dueRow
	at  time.Time
}

// enqueue queues one retry. A TaskID conflict means a task with that ID
// exists in the queue: if it is still going to run, the delivery is in hand;
// if it is dead (archived, or completed and retained), it would block this
// delivery forever, so it is deleted and the retry queued afresh.
func (s *Sweeper) enqueue(ctx context.Context, q queued) (enqueueOutcome, error) {
	id, queue := q.row.ID, q.row.Queue
	taskID := s.cfg.TaskID(id)
	var opts []asynq.Option
	if !q.at.IsZero() {
		opts = append(opts, asynq.ProcessAt(q.at))
	}
	for try := 0; try < 3; try++ {
		_, err := s.client.EnqueueContext(ctx, s.cfg.NewTask(id, q.row.WebhookName, queue, tracing.Current(ctx, "")), opts...)
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
		case asynq.TaskStateActive:
			// The row is due and was not marked queued, so this task
			// claimed it already (a claim clears the mark) and will not
			// again; or its mark's lease ran out while the task waited,
			// and it claims the row in a moment. Either way the row is
			// handed back: the next step queues it once the task has
			// ended, or finds it claimed (not due).
			return busy, nil
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
// has been waiting (zero when none), for stats and metrics. A disabled
// tenant's rows are left out: they are held by an operator's choice, not
// owed by the sweeper or the workers, and would otherwise keep the oldest
// due age growing for as long as the tenant stays disabled.
func (s *Sweeper) Backlog(ctx context.Context) (int64, time.Time, error) {
	now := s.cfg.Clock.Now().UTC()
	var count int64
	q := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ? AND next_retry <= ?", models.StatusFailed, now).Where(tenant.EnabledRows)
	if err := q.Count(&count).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("count due deliveries: %w", err)
	}
	if count == 0 {
		return 0, time.Time{}, nil
	}
	var oldest models.Delivery
	if err := s.db.WithContext(ctx).Select("next_retry").Where("status = ? AND next_retry <= ?", models.StatusFailed, now).Where(tenant.EnabledRows).
		Order("next_retry").Take(&oldest).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("oldest due delivery: %w", err)
	}
	return count, *oldest.NextRetry, nil
}

// stringArray is a text[] parameter, written as PostgreSQL's array literal
// so that GORM passes it whole instead of expanding it into a list.
type stringArray []string

// Value implements driver.Valuer.
func (a stringArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), nil
}
