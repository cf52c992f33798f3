package dispatch

import (
	"context"
	"errors"
	"time"
)

// follow sends, on the goroutine of an attempt that has ended, what the
// attempt left for it, one after the other, each in the place the last
// request left:
//
//   - the next version of an ordered document that its final outcome woke
//     (Outcome.next): sent at once rather than through a task of its own,
//     so that one document's versions follow each other at the pace of
//     its receiver, not of a round trip through the queue;
//   - otherwise, the deliveries of the tenant whose request just ended that
//     its share parked (overShare), oldest first: a tenant past its share
//     has its next attempt sent as soon as one of its requests ends, not
//     after every task queued since.
//
// It stops when nothing is left; when a parked delivery is refused again
// or postponed (its place was taken, or the webhook's rate limit or health
// holds it: parked again or due later, as any attempt), unless its tenant
// then has deliveries parked and no request in flight to resume them
// (tenantShare.stranded: it goes on with the next); when the woken
// version is not this goroutine's to send (another claim took it, or the
// rule holds it still: ErrNotClaimed); when the task's own deadline could
// no longer cover a request (errResumeEnded: that delivery is given back,
// due now, and a woken version queued as a task); or when ctx ends (a
// shutdown: a woken version is queued, and what is still parked is marked
// queued, swept after the mark's lease).
//
// What can happen twice? Nothing more than before: each delivery it sends
// is claimed like any other, so a sweep's retry or a task that finds it at
// the same time is fenced by the claim, and an ID followed after its row
// moved on is not claimed (ErrNotClaimed).
func (d *Dispatcher) follow(ctx context.Context, out Outcome) {
	if out.next == nil && out.freed == "" {
		return // the common case: nothing left, and nothing allocated
	}
	rctx := context.WithValue(ctx, resumedKey{}, true)
	for {
		id, mode, next := "", Retry, out.next
		switch {
		case next != nil && ctx.Err() != nil:
			d.wakeNext(ctx, *next)
			return
		case ctx.Err() != nil:
			return
		case next != nil:
			id, mode = next.ID, First
		case out.freed != "":
			id = d.share.unpark(out.freed)
		}
		if id == "" {
			return
		}
		tenant := out.freed
		var err error
		out, err = d.attempt(rctx, id, mode, true)
		switch {
		case errors.Is(err, ErrNotClaimed):
			// A stale parked ID, or a woken version another claim took or
			// the rule still holds: the place is still free.
			d.log.Debug("delivery moved on before this goroutine sent it", "delivery", id, "reason", err.Error())
			out = Outcome{freed: tenant}
			continue
		case err != nil:
			if next != nil && errors.Is(err, errResumeEnded) {
				d.wakeNext(ctx, *next)
			}
			if !errors.Is(err, errResumeEnded) && !errors.Is(err, ErrLeaseEnded) && ctx.Err() == nil {
				d.log.Warn("delivery not sent after the one before it; a sweep sends it", "delivery", id, "error", err.Error())
			}
			return
		case out.Postponed:
			// Parked again, or due later (a rate limit, the webhook's
			// health). What the tenant still has parked is resumed by
			// the end of one of its requests in flight; with none left
			// (stranded), by this goroutine, or it would wait for the
			// mark's lease. Each turn unparks one, and one parked again
			// means a request of its tenant was in flight: this ends.
			if out.freed == "" || !d.share.stranded(out.freed) {
				return
			}
			out = Outcome{freed: out.freed}
		}
	}
}

// resumedKey marks the context of an attempt follow makes.
type resumedKey struct{}

// errResumeEnded is an attempt follow made given back unsent because the
// deadline of the task it runs in could not cover its request.
var errResumeEnded = errors.New("parked delivery given back to the sweep: the task resuming it has too little time left")

// checkResumeDeadline lets an attempt follow makes send only while the
// deadline of the task it runs in covers its request's timeout and
// RecordMargin; otherwise it gives the claim back, due now for the sweep.
// The deadline is a context's, on the wall clock.
func (d *Dispatcher) checkResumeDeadline(ctx context.Context, c claimed, timeout time.Duration) error {
	if resumed, _ := ctx.Value(resumedKey{}).(bool); !resumed {
		return nil
	}
	if deadline, ok := ctx.Deadline(); !ok || leaseAllows(&deadline, time.Now(), timeout) {
		return nil
	}
	now := d.now()
	if err := d.release(ctx, c.row, &now); err != nil {
		return errors.Join(errResumeEnded, err)
	}
	return errResumeEnded
}
