package tasks

import (
	"context"

	"github.com/hibiken/asynq"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/models"
)

// Intake is the durable record of accepted events (outbox.Completer): told
// once an event's fan-out has committed, it lets the event go.
type Intake interface {
	FannedOut(ctx context.Context, tenant, eventID string) error
}

// fannedOut tells h.Intake that the event of t has been fanned out, when t
// came through the outbox. A failure only delays the release: the outbox
// queues the event again after outbox.recover_after, and the repeated
// fan-out creates nothing and releases it then.
func (h *Handlers) fannedOut(ctx context.Context, t *asynq.Task, tenant, eventID string) {
	if !h.throughOutbox(t) {
		return
	}
	if err := h.Intake.FannedOut(ctx, tenant, eventID); err != nil {
		h.logger().Warn("fanned-out event stays in the outbox; it will be queued again after outbox.recover_after and released then",
			"tenant", models.TenantOr(tenant), "event_id", eventID, "error", err.Error())
	}
}

// throughOutbox says t's event came through the outbox and this worker
// releases it: the fan-out deletes its row in the commit that writes its
// deliveries where the store can (dispatch.Inline.Outbox), and fannedOut
// does otherwise.
func (h *Handlers) throughOutbox(t *asynq.Task) bool {
	return h.Intake != nil && t.Headers()[event.OutboxHeader] != ""
}
