package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/retention"
	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/tracing"
)

// Handlers runs Homing's tasks in a worker.
type Handlers struct {
	Dispatcher *dispatch.Dispatcher
	Sweeper    *sweeper.Sweeper
	Retention  *retention.Retention
	// RollUp, when set, rolls up the console's closed hours
	// (inspect.RollUp) with each retention task, before the retention.
	RollUp func(ctx context.Context) (int, error)
	// Client enqueues the first-attempt tasks fan-out creates.
	Client *asynq.Client
	Logger *slog.Logger
	// Published, when set, records each event's doctype × event pair for
	// its tenant (tenant.Published: the portal's event list) before its
	// fan-out; a failure is logged and delivers the event all the same.
	Published interface {
		Record(ctx context.Context, tenant, docType, event string) error
	}
	// Intake releases an outbox event once fanned out (intake.go); nil
	// keeps every outbox row until the outbox queues it again.
	Intake Intake
}

// Register adds every handler to mux, and has the dispatcher queue the
// next delivery of an ordered document as a first attempt once the one
// before it is final (dispatch.Dispatcher.SetWake).
func (h *Handlers) Register(mux *asynq.ServeMux) {
	if h.Client != nil {
		h.Dispatcher.SetWake(h.enqueueFirst)
	}
	mux.HandleFunc(TypeEvent, h.HandleEvent)
	mux.HandleFunc(TypeDeliver, h.HandleDeliver)
	mux.HandleFunc(TypeRetry, h.HandleRetry)
	mux.HandleFunc(TypeSweep, h.HandleSweep)
	mux.HandleFunc(TypeRetention, h.HandleRetention)
}

func (h *Handlers) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

// HandleEvent decodes an event and hands it to the dispatcher: fan out →
// queue the first attempts of deliveries on other queues (and of those
// past the inline bounds) → make the first attempts of the deliveries on
// this task's queue here, concurrently (dispatch.HandleEvent owns their
// claims and says why nothing can happen twice). A crash between
// the records and the enqueues is healed by asynq's re-run: fan-out returns
// the unattempted records again, and the first-attempt TaskIDs keep the
// enqueues from doubling.
func (h *Handlers) HandleEvent(ctx context.Context, t *asynq.Task) error {
	ev, err := event.Decode(t.Payload())
	if err != nil {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	ev.AcceptedAt = event.AcceptedAt(t.Headers())
	ev.AcceptSeq = event.AcceptSeq(t.Headers())
	ev.TraceContext = tracing.FromHeaders(t.Headers())
	if h.Published != nil {
		if err := h.Published.Record(ctx, ev.Tenant, ev.DocType, ev.Event); err != nil {
			h.logger().Warn("the portal's event list misses this event's type until its next event", "event_id", ev.ID, "error", err.Error())
		}
	}
	if ev.Event == "workflow_transition" {
		// Published through a path that could not deliver synchronously:
		// still one attempt, never a retry.
		retries, _ := asynq.GetRetryCount(ctx)
		_, err := h.Dispatcher.DeliverNowOnRetry(ctx, ev, retries)
		var serr *event.SyncError
		if errors.As(err, &serr) {
			h.logger().Warn("workflow_transition delivery failed", "event_id", ev.ID, "error", err.Error())
			return nil
		}
		return err
	}
	queue, ok := asynq.GetQueueName(ctx)
	if !ok {
		queue = DefaultQueue
	}
	retries, _ := asynq.GetRetryCount(ctx)
	return permanent(h.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{
		Queue:     queue,
		Retries:   retries,
		Outbox:    h.throughOutbox(t),
		Committed: func(ctx context.Context) { h.fannedOut(ctx, t, ev.Tenant, ev.ID) },
		Enqueue:   h.enqueueFirst,
	}))
}

// enqueueFirst queues a delivery's first attempt; one already queued is
// left as it is.
func (h *Handlers) enqueueFirst(ctx context.Context, p dispatch.Pending) error {
	_, err := h.Client.EnqueueContext(ctx, NewDeliverTask(p.ID, p.WebhookName, p.Queue))
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err
	}
	return nil
}

// HandleDeliver runs a delivery's first attempt.
func (h *Handlers) HandleDeliver(ctx context.Context, t *asynq.Task) error {
	return h.attempt(ctx, t, dispatch.First)
}

// HandleRetry runs a retry the sweeper queued. It proceeds only if the row is
// still Failed and due: a sweep that raced with a finishing retry cannot send
// twice.
func (h *Handlers) HandleRetry(ctx context.Context, t *asynq.Task) error {
	return h.attempt(ctx, t, dispatch.Retry)
}

func (h *Handlers) attempt(ctx context.Context, t *asynq.Task, mode dispatch.Mode) error {
	p, err := DecodeDelivery(t.Payload())
	if err != nil {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	_, err = h.Dispatcher.Attempt(tracing.WithLink(ctx, t.Headers()[tracing.LinkHeader]), p.DeliveryID, mode)
	switch {
	case errors.Is(err, dispatch.ErrNotClaimed):
		// Rare (a duplicate task, a row another attempt took), and the
		// trail of a stall when a due row is left with its queued mark:
		// said at INFO, so that the process's log explains it.
		h.logger().Info("attempt skipped", "delivery", p.DeliveryID, "mode", mode.String(), "reason", err.Error())
		return nil
	case errors.Is(err, dispatch.ErrLeaseEnded):
		return nil // logged by dispatch; given back due now, for the sweeper
	}
	return permanent(err)
}

// HandleSweep runs one sweeper tick: steps until nothing due is left that
// a retry queue has room for, within a budget shorter than the interval.
func (h *Handlers) HandleSweep(ctx context.Context, _ *asynq.Task) error {
	ctx, cancel := context.WithTimeout(ctx, h.Sweeper.TickBudget())
	defer cancel()
	_, err := h.Sweeper.Tick(ctx)
	return err
}

// HandleRetention is the hourly housekeeping: it rolls up the console's
// closed hours, so that no console read pays for them, then deletes one
// run's worth of expired final deliveries. A failed rollup does not keep the
// retention from running; the task fails with both errors.
func (h *Handlers) HandleRetention(ctx context.Context, _ *asynq.Task) error {
	var rollErr error
	if h.RollUp != nil {
		n, err := h.RollUp(ctx)
		if err != nil {
			rollErr = fmt.Errorf("roll up the console's hours (a console read rolls up what it misses): %w", err)
		} else if n > 0 {
			h.logger().Debug("console hours rolled up", "hours", n)
		}
	}
	if h.Retention == nil {
		return rollErr
	}
	_, err := h.Retention.RunOnce(ctx)
	return errors.Join(rollErr, err)
}
