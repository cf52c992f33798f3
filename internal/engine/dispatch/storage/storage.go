// Package storage holds every statement of the delivery lifecycle's hot
// path behind one interface, Store: an event's webhooks and its delivery
// rows (FanOut), the claim of an attempt (Claim), its outcome (Record), and
// the ways a claim ends without one (Release, Abandon, HandBack, NotSent).
//
// There are two implementations, held to the same behaviour by one
// conformance suite (conformance_test.go):
//
//   - GORM, the reference: one plain statement at a time, on any database
//     GORM opens (SQLite in `homing dev` and in tests).
//   - Postgres, for production: concurrent tasks of one worker share each
//     statement and its commit (internal/lib/groupcommit), their inputs travel
//     as arrays (unnest), and fan-out's webhooks are cached behind a
//     version check (hookcache.go). What it does not speed up it leaves to
//     the GORM implementation it embeds.
//
// The package decides nothing about a delivery: which status an outcome
// leads to is dispatch's (decide.go), and the only rules written here are
// the ones a statement must enforce itself to be safe under concurrency:
// which rows a claim may take (Claimable, Held, the lease) and how an
// attempt moves its webhook's health.
package storage

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/opsevent"
	"github.com/homingdev/homing/models"
)

// Store is the delivery lifecycle's access to the database. Every method is
// safe for concurrent use; every write is fenced on the state its caller
// saw, so that of two tasks racing for one delivery at most one wins.
type Store interface {
	// FanOut writes an event's delivery rows: plan turns the enabled
	// webhooks of ev's tenant, doctype and event, in ID order, into the
	// rows to insert (nothing is asked when there are none). A disabled
	// tenant's event is written too, and kept: the claim holds its rows
	// until the tenant is enabled again, and a row planned claimed at
	// insert is written unclaimed instead (Written.Held), the check in the
	// INSERT's own transaction. A row whose (event, webhook)
	// exists already is left alone and reported in Written.Existing. plan
	// may be called more than once (when the webhooks it was given turn
	// out to have changed before the INSERT, nothing is written and it is
	// asked again with fresh ones), so every call plans from scratch.
	FanOut(ctx context.Context, ev EventKey, plan Plan) (Written, error)
	// Claim takes a delivery for one attempt of mode at in.Now: it counts
	// the attempt, clears queued_at and, unless mode is Sync, moves
	// next_retry to the lease (Lease). It takes nothing of a disabled
	// tenant, the check in the claim's own statement. When it takes
	// nothing, Claim says what it saw instead, for the caller to tell why.
	Claim(ctx context.Context, in ClaimIn) (Claim, error)
	// Record writes an attempt's history row and its delivery's new state
	// in one transaction, and moves the webhook's health (the health
	// rule, health.go). The delivery is updated only if it is still in
	// o.FromStatus with o.Attempt.Attempt attempts; Recorded.Applied says
	// whether it was. The history row is written either way.
	Record(ctx context.Context, o Outcome) (Recorded, error)
	// Release gives back a claim whose request was not made: the row, as
	// claimed, gets its attempt uncounted and next_retry set to due. It
	// does nothing if the row has moved on.
	Release(ctx context.Context, claimed models.Delivery, due *time.Time, now time.Time) error
	// Park gives back a claim whose request its tenant's share refused,
	// to be resumed by this process as the tenant's requests end: the
	// row, as claimed, gets its attempt uncounted, is due at now, and is
	// marked queued at now, so that no sweep takes it before the mark's
	// lease (the sweep's queued lease, a minute) unless the process does
	// not resume it. It does nothing if the row has moved on.
	Park(ctx context.Context, claimed models.Delivery, now time.Time) error
	// Abandon makes a delivery, still as read, Exhausted with reason and no
	// request made; false when it had moved on.
	Abandon(ctx context.Context, row models.Delivery, reason string, now time.Time) (bool, error)
	// HandBack gives a Failed delivery a claim refused, as read, back to
	// the sweep: queued_at cleared, so that a step can queue it again, and
	// due by now at the latest (a retry held while its webhook is
	// failing, an attempt held while its tenant is disabled). It does
	// nothing if the row has moved on (another status or attempt count):
	// a claim taken since keeps its lease.
	HandBack(ctx context.Context, row models.Delivery, now time.Time) error
	// Hold gives an ordered delivery a claim refused because it is held
	// behind an earlier one of its key (Claim.Blocked), as read, back to
	// the sweep due OrderRecheck later, deciding again under its key's
	// lock (order.go): when it is no longer held, it is due now and Hold
	// reports false, for the caller to claim it again. It does nothing if
	// the row has moved on.
	Hold(ctx context.Context, row models.Delivery, now time.Time) (bool, error)
	// Unblocked answers, of ids (the rows a FanOut wrote held,
	// Written.Blocked), those the ordering rule no longer holds now that
	// they are committed: their first attempts are to be queued. The
	// others wait for the wake of the delivery ahead of them (or the
	// sweep's recheck).
	Unblocked(ctx context.Context, ids []string) ([]string, error)
	// Wake makes the next delivery of key after delivery after due now,
	// if it has no attempt counted, and answers its ID ("" when none). A final outcome's own
	// wake (Recorded.Woken) reads the key as its statement began: a row
	// the fan-out committed meanwhile, which Unblocked found still held,
	// is seen only by a wake after that commit, which the caller runs when
	// the outcome's woke nothing.
	Wake(ctx context.Context, k OrderKey, after string, now time.Time) (string, error)
	// WakeAfterEvent is Wake after the place seq of an event of key's
	// document that made no ordered delivery of key's webhook (its
	// condition was false, or its request could not be built): while
	// that event waited in the outbox it held the key's later deliveries,
	// and once its fan-out has released its outbox row nothing else
	// would wake them before the sweep's recheck (OrderRecheck).
	WakeAfterEvent(ctx context.Context, k OrderKey, seq int64, now time.Time) (string, error)
	// NotSent writes why a Failed delivery could not be sent for a reason
	// on Homing's side into its last_error, changing nothing else.
	NotSent(ctx context.Context, id, reason string) error
	// Announce publishes the operational events (package opsevent) of
	// webhookID's health changes not announced yet, each once: `failing`
	// once its failures in a row reach models.FailingAfter, `recovered`
	// after a success ends an announced episode. lastError is the error of
	// the attempt just recorded, when there was one.
	Announce(ctx context.Context, webhookID, lastError string, now time.Time) error
	// Health reads a webhook's health; one without a row is healthy.
	Health(ctx context.Context, webhookID string) (models.WebhookHealth, error)
	// EventDeliveries reads the deliveries of tenant's event (id,
	// webhook_name, status, last_error), by webhook name.
	EventDeliveries(ctx context.Context, tenant, eventID string) ([]models.Delivery, error)
}

// For is the Store for db: Postgres on PostgreSQL, GORM elsewhere. A
// PostgreSQL *gorm.DB without a pool of its own (one inside a transaction)
// gets GORM too, whose statements are as correct there, only unbatched.
func For(db *gorm.DB) Store { return ForOps(db, opsevent.Default) }

// ForOps is For with the operational events published through ops (nil
// publishes none).
func ForOps(db *gorm.DB, ops *opsevent.Publisher) Store {
	if db.Dialector.Name() == "postgres" {
		if s, err := NewPostgres(db); err == nil {
			s.ops = ops
			return s
		}
	}
	g := NewGORM(db)
	g.ops = ops
	return g
}

// EventKey names the event whose rows FanOut writes.
type EventKey struct {
	Tenant, DocType, Event string
	// Outbox, when not empty, is the event's ID in the durable intake
	// (outbox_events): a store that can deletes the event's outbox row in
	// the commit that writes its rows, and says so in Written.Released.
	// A row another transaction holds (a relay queueing it) is left.
	Outbox string
}

// Plan turns an event's matching webhooks into the delivery rows to write
// (see Store.FanOut).
type Plan func(hooks []models.Webhook) []models.Delivery

// Written is what FanOut did.
type Written struct {
	// Rows are the rows of the plan that was written.
	Rows []models.Delivery
	// Created is set when every row of Rows was created by this call.
	Created bool
	// Existing is, when Created is not set, every delivery of the event
	// for Rows' webhooks as it is now, this call's or an earlier one's (id,
	// webhook_id, webhook_name, status, attempts).
	Existing []models.Delivery
	// Released is set when the event's outbox row (EventKey.Outbox) was
	// deleted in the commit that wrote Rows. When it is not, the caller
	// releases the row itself (outbox.Completer).
	Released bool
	// Held are the IDs of the rows this call created that were planned
	// claimed at insert (an attempt counted) but were written unclaimed,
	// because their tenant is disabled: no attempt counted, due at their
	// created_at, for the sweep once the tenant is enabled again. The
	// caller sends none of them.
	Held []string
	// Blocked are the IDs of the rows this call created that were planned
	// claimed at insert but were written unclaimed because the ordering
	// rule holds them (order.go), due OrderRecheck later: the caller asks
	// Unblocked which of them to queue after all, once committed (the
	// wake of the delivery ahead, committing meanwhile, could not see
	// them); the others are woken in their turn.
	Blocked []string
}

// Mode says which state an attempt may claim a delivery from.
type Mode int

const (
	// First is the first attempt run by the task fan-out enqueued: the row
	// is Failed with no attempt made yet.
	First Mode = iota
	// Retry is a retry enqueued by the sweeper: the row is Failed and due.
	Retry
	// Sync is workflow_transition's one attempt in the publisher: the row is
	// already final (Exhausted) and becomes Delivered only on success.
	Sync
)

func (m Mode) String() string {
	switch m {
	case First:
		return "first"
	case Retry:
		return "retry"
	default:
		return "sync"
	}
}

// LeaseMargin is added to a webhook's timeout to form the claim's lease:
// while an attempt is in flight its row is Failed with next_retry in the
// future, so no sweep picks it up; if the worker dies, the row comes due
// again by itself.
const LeaseMargin = time.Minute

// Lease is when a claim taken at now ends for hook.
func Lease(now time.Time, hook models.Webhook) time.Time {
	return now.Add(hook.Timeout() + LeaseMargin)
}

// Claimable reports whether row is in a state an attempt of mode may take
// at now.
func Claimable(row models.Delivery, mode Mode, now time.Time) bool {
	switch mode {
	case First:
		return row.Status == models.StatusFailed && row.Attempts == 0
	case Retry:
		return row.Status == models.StatusFailed && row.NextRetry != nil && !row.NextRetry.After(now)
	default:
		return row.Status == models.StatusExhausted && row.Attempts == 0
	}
}

// Held reports whether a retry of delivery id waits while its webhook is
// failing: only the probe the sweep chose is sent.
func Held(h models.WebhookHealth, id string, mode Mode) bool {
	return mode == Retry && h.Failing() && (h.ProbeID == nil || *h.ProbeID != id)
}

// ClaimIn is one claim.
type ClaimIn struct {
	ID   string
	Mode Mode
	Now  time.Time
}

// Claim is what Claim took, or saw.
type Claim struct {
	// Claimed is set when the attempt is this caller's.
	Claimed bool
	// Found is set when the delivery exists.
	Found bool
	// Row is the delivery as claimed (attempt counted, lease set) or, when
	// not claimed, as read.
	Row models.Delivery
	// Hook is its webhook, headers and FailingSince included; nil when the
	// webhook was deleted.
	Hook *models.Webhook
	// Health is the webhook's health, when not claimed.
	Health models.WebhookHealth
	// TenantDisabled is set, when not claimed, if the delivery's tenant
	// is disabled (or gone): nothing of it may be sent until it is
	// enabled again.
	TenantDisabled bool
	// Blocked is set, when not claimed, if the delivery is held behind an
	// earlier one of its key (the ordering rule, order.go).
	Blocked bool
	// PrevNext is next_retry before the claim, for Release.
	PrevNext *time.Time
}

// Recorded is what Record wrote.
type Recorded struct {
	// Applied says whether the delivery was updated (it was still in
	// Outcome.FromStatus with the attempt's count).
	Applied bool
	// Exhausted is how many other pending deliveries of the webhook
	// Outcome.Disable made Exhausted.
	Exhausted int64
	// Woken is the delivery the outcome released, due now, when it made
	// the head of an ordered key final (order.go); "" when none.
	Woken string
}

// Outcome is what Record writes: an attempt's history row and its delivery's
// new state.
type Outcome struct {
	// Attempt is the history row; its DeliveryID and Attempt (the count
	// the claim left) fence the delivery's update, and its Method, URL and
	// StatusCode are also the delivery's last.
	Attempt models.Attempt
	// FromStatus is the status the claim left the delivery in.
	FromStatus string
	// Status, NextRetry, LastError and LastResponse are the delivery's
	// new state, written at UpdatedAt.
	Status       string
	NextRetry    *time.Time
	LastError    string
	LastResponse string
	UpdatedAt    time.Time
	// WebhookID and Health move the webhook's health (health.go).
	WebhookID string
	Health    HealthSignal
	// Disable, when set, disables the webhook with this reason and
	// exhausts its other Failed deliveries, in the same transaction.
	Disable string
	// Order is the delivery's key when it is ordered (KeyOf): a final
	// outcome wakes the next delivery of the key in its transaction.
	Order *OrderKey
}
