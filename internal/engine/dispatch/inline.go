package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// MaxInlinePerEvent is how many first attempts one event's task makes
// itself (HandleEvent); the event's other deliveries on its queue get a
// webhook:deliver task each, as every delivery did before. It keeps one
// event with hundreds of webhooks from taking every inline slot of the
// process (Config.InlineRequests) while other events wait for theirs.
const MaxInlinePerEvent = 32

// DefaultInlineRequests is Config.InlineRequests when unset: the default
// of worker.concurrency.
const DefaultInlineRequests = 50

// slots bounds the inline first attempts in flight in one process
// (Config.InlineRequests). An inline attempt takes a slot just before its
// request and gives it back once its outcome is recorded: not at fan-out,
// where a slot would sit idle through the INSERT's group commit and the
// other enqueues (taken there, 200 slots let 30 % of a 10-webhook event's
// rows be inlined, not 100 %). An attempt that waits for a slot waits on
// its lease: the send checks it after the wait, and a claim with too
// little left is given back and queued as a task of its own
// (ErrLeaseEnded), so a process whose slots are all held by slow
// receivers hands its backlog to the queue instead of sending late.
type slots chan struct{}

// take waits for a slot, as long as ctx lets it.
func (s slots) take(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	default:
	}
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give returns one slot.
func (s slots) give() { <-s }

// sendInline makes the first attempts an event's task claimed at insert,
// each on its own goroutine (the last on the task's own, whose stack is
// warm), so that a slow receiver holds up only its own request. Each keeps
// the rules of a single attempt (send): its lease is checked before its
// request, a claim whose lease can no longer cover it is given back unsent
// and queued as a task of its own (ErrLeaseEnded), and its outcome goes
// through the batched outcome statement. One attempt's error leaves the
// others as they are: they are sent and recorded, or given back, each on
// its own, and the errors are returned together.
func (d *Dispatcher) sendInline(ctx context.Context, claims []*claimed, queue string, enqueue func(context.Context, Pending) error) error {
	if len(claims) == 0 {
		return nil
	}
	errs := make([]error, len(claims))
	panics := make([]any, len(claims))
	var wg sync.WaitGroup
	last := len(claims) - 1
	for i, c := range claims[:last] {
		wg.Go(func() {
			// Raised again on the task's goroutine, where asynq turns a
			// panic into the task's error instead of ending the process.
			defer func() { panics[i] = recover() }()
			errs[i] = d.sendClaimed(ctx, c, queue, enqueue)
		})
	}
	errs[last] = d.sendClaimed(ctx, claims[last], queue, enqueue)
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
	return errors.Join(errs...)
}

// sendClaimed makes one inline first attempt in a slot of its own. A
// shutdown while it waits gives the claim back unsent, due now: the task's
// re-run queues the row, as it does a request the shutdown interrupted.
func (d *Dispatcher) sendClaimed(ctx context.Context, c *claimed, queue string, enqueue func(context.Context, Pending) error) error {
	if err := d.slots.take(ctx); err != nil {
		now := d.now()
		err = fmt.Errorf("attempt of delivery %s not started: %w", c.row.ID, err)
		return errors.Join(err, d.release(ctx, c.row, &now))
	}
	defer d.slots.give()
	out, err := d.send(ctx, *c, First)
	// In its inline slot still: the next version its outcome woke, and
	// the tenant's parked deliveries, take the place its request left.
	defer d.follow(ctx, out)
	if errors.Is(err, ErrLeaseEnded) {
		// Given back unsent, due now: queued as a first attempt of its
		// own, whose claim is fenced like any other (the sweeper's retry
		// may have it already).
		row := c.row
		if qerr := enqueue(ctx, Pending{ID: row.ID, WebhookName: row.WebhookName, Queue: queue}); qerr != nil {
			return fmt.Errorf("enqueue first attempt of delivery %s given back unsent: %w", row.ID, qerr)
		}
		return nil
	}
	return err
}

// giveBack releases claims whose requests were not made (the event's
// other deliveries could not be queued): each row is due again at once
// and unattempted, so the task's re-run hands it out as Pending.
func (d *Dispatcher) giveBack(ctx context.Context, claims []*claimed) error {
	var errs []error
	for _, c := range claims {
		now := d.now()
		if err := d.release(ctx, c.row, &now); err != nil {
			errs = append(errs, fmt.Errorf("give back delivery %s: %w", c.row.ID, err))
		}
	}
	return errors.Join(errs...)
}
