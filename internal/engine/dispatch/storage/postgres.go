package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/lib/groupcommit"
	"github.com/homingdev/homing/models"
)

// Postgres is the Store for PostgreSQL. The hot path's four statements
// (the webhooks of an event, the fan-out's INSERT, the claim of an attempt,
// the outcome of an attempt) each run through a group, so that concurrent
// tasks of one worker share statements and commits. Each is one fixed
// statement text whatever the batch size: the inputs travel as arrays and
// unnest into rows, so pgx prepares it once per connection
// (postgres_statements.go). Fan-out's webhooks are cached (hookCache) and
// the INSERT checks that they are still current.
//
// What is rare keeps the reference statements of the embedded GORM: a
// claim that takes nothing (to say why), a Sync claim, an outcome that
// disables its webhook, and the statements that end a claim without a
// request.
type Postgres struct {
	*GORM
	hooks  *hookCache
	match  *groupcommit.Group[matchKey, matchResult]
	insert *groupcommit.Group[insertSet, insertResult]
	record *groupcommit.Group[Outcome, recordOut]
	claim  *groupcommit.Group[ClaimIn, claimOut]
}

// NewPostgres is the Store for db, a PostgreSQL database opened with pgx.
func NewPostgres(db *gorm.DB) (*Postgres, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	b := &batch{db: sqlDB}
	return &Postgres{
		GORM:   NewGORM(db),
		hooks:  newHookCache(),
		match:  newGroup(b.runMatch),
		insert: newGroup(b.runInsert),
		record: newGroup(b.runRecord),
		claim:  newGroup(b.runClaim),
	}, nil
}

// planEach is given as the first argument of the batched statements that
// join a table to their arrays (the outcome, the claim, the webhooks
// SELECT): pgx then runs each as an unnamed statement (its description
// cached), which PostgreSQL plans for the arrays at hand on every execution.
// A named prepared statement switches to a generic plan after five runs,
// and a generic plan made while deliveries was new and never analyzed (a
// fresh install, the first minute of a benchmark) joined by walking every
// Failed row of deliveries_due instead of looking each ID up in the primary
// key: a statement that costs O(batch) became O(table) until autovacuum's
// next ANALYZE. Planning each time costs less than that plan did in the
// benchmark (docs/performance.md, round 3). The fan-out INSERT joins
// nothing that grows (its conflicts are found through the unique index
// whatever the plan, and its claim check reads the small tenants table by
// its primary key), so it keeps its prepared statement.
const planEach = pgx.QueryExecModeCacheDescribe

// groupMaxBatch bounds the inputs of one batched statement.
const groupMaxBatch = 256

// groupMaxRunning is how many statements of one kind may be in flight at
// once. One lets the largest batches form: callers queue while it runs. Two
// formed smaller batches and gave about half of the gain in the benchmark
// (docs/performance.md); a lone caller never waits either way.
const groupMaxRunning = 1

// groupTimeout bounds one batched statement (groupcommit's run).
const groupTimeout = time.Minute

// newGroup is a group for run with the hot path's bounds.
func newGroup[In, Out any](run func(context.Context, []In) ([]Out, error)) *groupcommit.Group[In, Out] {
	return groupcommit.New(run, groupMaxBatch, groupMaxRunning, groupTimeout)
}

// errStaleHooks means rows were planned from cached webhooks that have
// changed since: nothing was written, and the event is planned again.
var errStaleHooks = errors.New("webhooks changed since they were cached")

// FanOut implements Store. It plans from the cached webhooks first and,
// when those turn out stale or plan nothing, once more from a fresh read.
// An answer from the cache is only trusted through the INSERT's check, so a
// plan of no row at all (every condition false) is confirmed by a fresh
// read. The event's outbox row (ev.Outbox) is deleted by the INSERT that
// writes its rows, when that writes them and no one holds the row; an
// event that plans no row leaves it to the caller.
func (s *Postgres) FanOut(ctx context.Context, ev EventKey, plan Plan) (Written, error) {
	key := matchKey{models.TenantOr(ev.Tenant), ev.DocType, ev.Event}
	var release *eventKey
	if ev.Outbox != "" {
		release = &eventKey{key.tenant, ev.Outbox}
	}
	if hooks, version, ok := s.hooks.get(key); ok {
		if rows := plan(hooks); len(rows) > 0 {
			w, err := s.write(ctx, rows, version, release)
			if !errors.Is(err, errStaleHooks) {
				return w, err
			}
		}
	}
	r, err := s.match.Do(ctx, key)
	if err != nil {
		return Written{}, fmt.Errorf("load webhooks: %w", err)
	}
	s.hooks.put(key, r.hooks, r.version)
	if len(r.hooks) == 0 {
		return Written{Created: true}, nil
	}
	rows := plan(r.hooks)
	if len(rows) == 0 {
		return Written{Created: true}, nil
	}
	// A fresh read is written as read (version 0), like the reference.
	return s.write(ctx, rows, 0, release)
}

// write inserts rows planned from webhooks read at version (0: whatever
// webhooks_version reads now). Concurrent fan-outs share one INSERT and its
// commit (runInsert); the rows are committed before this returns, so before
// any request. release, when set, is the outbox row the INSERT deletes
// with them.
func (s *Postgres) write(ctx context.Context, rows []models.Delivery, version int64, release *eventKey) (Written, error) {
	r, err := s.insert.Do(ctx, insertSet{rows: rows, version: version, release: release})
	if err != nil {
		return Written{}, fmt.Errorf("create deliveries: %w", err)
	}
	s.hooks.saw(r.version)
	if version != 0 && r.version != version {
		return Written{}, errStaleHooks
	}
	w, err := s.written(ctx, rows, r.created)
	if err != nil {
		return Written{}, err
	}
	w.Released, w.Held, w.Blocked = r.released, r.held, r.blocked
	slices.Sort(w.Held)
	slices.Sort(w.Blocked)
	return w, nil
}

// Claim implements Store. The common case takes one round trip shared with
// concurrent claims (runClaim): claim and read the row and its webhook
// together. When that takes nothing, or for a Sync claim, the reference
// claim finds out why (or takes a row that changed in between).
func (s *Postgres) Claim(ctx context.Context, in ClaimIn) (Claim, error) {
	if in.Mode != Sync {
		r, err := s.claim.Do(ctx, in)
		if err != nil {
			return Claim{}, fmt.Errorf("claim delivery %s: %w", in.ID, err)
		}
		if r.ok {
			return r.claim, nil
		}
	}
	return s.GORM.Claim(ctx, in)
}

// Record implements Store. Concurrent outcomes share one statement and its
// commit (runRecord), which moves each webhook's health by what the
// database holds. An outcome that disables its webhook (once per webhook),
// or makes its delivery Exhausted, is the reference's transaction, which
// publishes its operational event in the same commit. Either way a final
// outcome of an ordered delivery wakes the next of its key in its commit.
func (s *Postgres) Record(ctx context.Context, o Outcome) (Recorded, error) {
	if o.Disable != "" || (o.Status == models.StatusExhausted && s.ops != nil) {
		return s.GORM.Record(ctx, o)
	}
	r, err := s.record.Do(ctx, o)
	if err != nil {
		return Recorded{}, fmt.Errorf("record attempt %d of delivery %s: %w", o.Attempt.Attempt, o.Attempt.DeliveryID, err)
	}
	return Recorded{Applied: r.applied, Woken: r.woken}, nil
}
