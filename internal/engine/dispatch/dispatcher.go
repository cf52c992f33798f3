// Package dispatch turns events into delivery records and runs attempts:
// fan-out (event → one record per matching webhook), the attempt itself
// (claim → decide → send → record) shared by first attempts, retries and
// the synchronous workflow_transition path. Every statement it runs goes
// through one storage.Store; which one (batched on PostgreSQL, plain
// elsewhere) is decided once, in New.
package dispatch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/internal/engine/opsevent"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/lib/clock"
)

// ErrNotClaimed means the delivery was not in a state this attempt may take:
// another task already sent it, it is not due yet, or it is final. The
// caller drops its task; nothing was sent.
var ErrNotClaimed = errors.New("delivery not claimable")

// ErrLeaseEnded means a claimed attempt was not sent because its lease had
// too little left to cover the request and its record (an inline first
// attempt that waited too long after fan-out, a stalled worker): the claim
// was given back, and the sweeper sends the delivery (or a retry that
// claimed it since already has). The caller drops its task.
var ErrLeaseEnded = errors.New("claim's lease ended before its request")

// Config holds what the dispatcher needs from Homing's configuration.
type Config struct {
	Schedule Schedule
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
	// builds (delivery.max_payload_bytes); 0 is template.MaxRenderedBytes.
	MaxPayloadBytes int
	// RenderTimeLimit is the time limit of a body or URL template's
	// rendering (delivery.template_time_limit); 0 is
	// template.MaxRenderTime. Tests set a tiny one to meet the limit
	// without load, or one out of reach to meet only steps and bytes.
	RenderTimeLimit time.Duration
	// ConditionTimeLimit is the time limit of a condition's evaluation
	// (delivery.condition_time_limit); 0 is condition.MaxTime.
	ConditionTimeLimit time.Duration
	// InlineRequests bounds the first attempts that event tasks make
	// themselves (HandleEvent) in flight at once in this process; 0 is
	// DefaultInlineRequests. The worker sets it to worker.concurrency.
	InlineRequests int
	// TenantRequests is the share of this process's requests (of
	// InlineRequests, worker.concurrency) kept free for every tenant
	// (tenantShare): a tenant other than the default past it waits while
	// no more than that many are free; 0 is no bound. The worker sets it
	// to worker.tenant_share of worker.concurrency.
	TenantRequests int
	// Ops publishes the operational events of what attempts change
	// (package opsevent); nil is opsevent.Default.
	Ops *opsevent.Publisher
}

// Dispatcher fans out events and runs attempts against one database.
type Dispatcher struct {
	store        storage.Store
	sender       *send.Sender
	box          *secretbox.Box
	schedule     Schedule
	disableAfter time.Duration
	log          *slog.Logger
	clock        clock.Clock
	newID        func() string
	conds        *conditionCache
	observer     Observer
	limiter      Limiter
	maxPayload   int
	renderTime   time.Duration
	condTime     time.Duration
	// slots bounds inline first attempts (Config.InlineRequests).
	slots slots
	// share bounds each tenant's requests in flight (Config.TenantRequests).
	share *tenantShare
	// wake queues the attempt of an ordered delivery its predecessor's
	// outcome released (SetWake); nil leaves it to the sweep.
	wake func(context.Context, Pending) error
}

// SetWake sets how the next delivery of an ordered document is queued
// once the one before it is final: the worker queues its first-attempt
// task (a woken delivery has no attempt counted, so a first attempt's
// claim takes it). Without it, the woken delivery is due now and the sweep
// queues it. Call it before the dispatcher is in use.
func (d *Dispatcher) SetWake(wake func(context.Context, Pending) error) { d.wake = wake }

// New builds a Dispatcher on db, through the Store made for its database
// (storage.For). The sender is shared by every attempt so that connections
// to a receiver are reused.
func New(db *gorm.DB, sender *send.Sender, box *secretbox.Box, cfg Config) *Dispatcher {
	d := &Dispatcher{
		store:        storage.ForOps(db, cmp.Or(cfg.Ops, opsevent.Default)),
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
		renderTime:   cfg.RenderTimeLimit,
		condTime:     cfg.ConditionTimeLimit,
		slots:        make(slots, cmp.Or(cfg.InlineRequests, DefaultInlineRequests)),
		share:        newTenantShare(cfg.TenantRequests, cmp.Or(cfg.InlineRequests, DefaultInlineRequests)),
	}
	if len(d.schedule) == 0 {
		d.schedule = DefaultSchedule
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
