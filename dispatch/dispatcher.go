// Package dispatch turns events into delivery records and runs attempts:
// fan-out (event → one record per matching webhook), the attempt itself
// (claim → send → record) shared by first attempts, retries and the
// synchronous workflow_transition path.
package dispatch

import (
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/homingdev/homing/clock"
	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/retry"
	"github.com/homingdev/homing/secretbox"
)

// ErrNotClaimed means the delivery was not in a state this attempt may take:
// another task already sent it, it is not due yet, or it is final. The
// caller drops its task; nothing was sent.
var ErrNotClaimed = errors.New("delivery not claimable")

// claimMargin is added to a webhook's timeout to form the claim lease: while
// an attempt is in flight its row is Failed with next_retry in the future, so
// no sweep picks it up; if the worker dies, the row comes due again by itself.
const claimMargin = time.Minute

// Config holds what the dispatcher needs from Homing's configuration.
type Config struct {
	Schedule retry.Schedule
	// DisableAfter disables a webhook whose deliveries have only failed for
	// this long (health.disable_after); 0 never disables.
	DisableAfter time.Duration
	// Logger receives one line per attempt outcome; secrets never reach it.
	Logger *slog.Logger
	Clock  clock.Clock
	// NewID makes delivery IDs; UUIDv7 by default (time-ordered, so the
	// primary key index stays append-mostly).
	NewID func() string
	// Observer is told of every committed outcome, for metrics; nil is
	// none.
	Observer Observer
	// Limiter enforces webhooks' rate_limit; nil sends without a limit.
	Limiter Limiter
	// MaxPayloadBytes caps a rendered body and every value its template
	// builds (delivery.max_payload_bytes); 0 is delivery.MaxRenderedBytes.
	MaxPayloadBytes int
}

// Dispatcher fans out events and runs attempts against one database.
type Dispatcher struct {
	db           *gorm.DB
	sender       *delivery.Sender
	box          *secretbox.Box
	schedule     retry.Schedule
	disableAfter time.Duration
	log          *slog.Logger
	clock        clock.Clock
	newID        func() string
	conds        *conditionCache
	observer     Observer
	limiter      Limiter
	maxPayload   int
	// postgres enables the single-statement claim and record, which use
	// PostgreSQL's UPDATE … FROM … RETURNING, interval arithmetic and
	// data-modifying WITH. SQLite is in-process: its round trips are
	// function calls, and it keeps the portable statements.
	postgres bool
	// batch shares the hot path's statements between concurrent tasks on
	// PostgreSQL (batch.go, on internal/groupcommit); nil elsewhere.
	batch *batched
	// hooks caches fan-out's webhooks where batch is set (hookCache).
	hooks *hookCache
}

// New builds a Dispatcher. The sender is shared by every attempt so that
// connections to a receiver are reused.
func New(db *gorm.DB, sender *delivery.Sender, box *secretbox.Box, cfg Config) *Dispatcher {
	d := &Dispatcher{
		db:           db,
		sender:       sender,
		box:          box,
		schedule:     cfg.Schedule,
		disableAfter: cfg.DisableAfter,
		log:          cfg.Logger,
		clock:        cfg.Clock,
		newID:        cfg.NewID,
		conds:        newConditionCache(),
		observer:     cfg.Observer,
		limiter:      cfg.Limiter,
		maxPayload:   cfg.MaxPayloadBytes,
		postgres:     db.Dialector.Name() == "postgres",
	}
	if d.postgres {
		if sqlDB, err := db.DB(); err == nil {
			d.batch, d.hooks = newBatched(sqlDB), newHookCache()
		}
	}
	if len(d.schedule) == 0 {
		d.schedule = retry.DefaultSchedule
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	if d.newID == nil {
		d.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	return d
}

// now is the dispatcher's clock, truncated to the precision PostgreSQL keeps
// so that a time written and read back compares equal.
func (d *Dispatcher) now() time.Time { return d.clock.Now().UTC().Truncate(time.Microsecond) }
