// Package tasks defines Homing's asynq task types, their JSON payloads (kept
// readable in asynqmon, and never carrying a secret) and their handlers.
package tasks

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/tracing"
)

// Task type names, as shown in asynqmon.
const (
	TypeEvent   = event.TaskType
	TypeDeliver = "webhook:deliver"
	TypeRetry   = "webhook:retry"
	TypeSweep   = "webhook:sweep"
	// TypeRetention deletes old final deliveries.
	TypeRetention = "webhook:retention"
)

// DefaultQueue carries events; deliveries go to their webhook's queue.
const DefaultQueue = event.Queue

// SystemQueue carries Homing's periodic tasks (sweep, retention). Every
// worker serves it with a high weight, so a sweep never waits behind a
// backlog of slow deliveries: the tick stays milliseconds long in practice,
// not only in principle.
const SystemQueue = "homing_system"

// MaxRetry is asynq's retry budget for Homing's tasks (event.MaxRetry says why).
const MaxRetry = event.MaxRetry

// ErrBadPayload marks a task whose payload cannot be decoded; such a task
// is archived at once (asynq.SkipRetry).
var ErrBadPayload = event.ErrBadPayload

// DeliverTaskID is the TaskID of a delivery's first attempt.
func DeliverTaskID(deliveryID string) string { return "webhook_deliver::" + deliveryID }

// RetryTaskID is the TaskID of a delivery's retry: the sweeper's concurrency
// guard, so two sweeps never queue the same retry twice.
func RetryTaskID(deliveryID string) string { return "webhook_retry::" + deliveryID }

// DeliveryPayload is the payload of webhook:deliver and webhook:retry tasks.
type DeliveryPayload struct {
	DeliveryID string `json:"delivery_id"`
	Webhook    string `json:"webhook,omitempty"` // for people reading asynqmon
}

func newDeliveryTask(typ, taskID, queue string, p DeliveryPayload, timeout time.Duration, headers map[string]string) *asynq.Task {
	b, _ := json.Marshal(p) // two strings: cannot fail
	return asynq.NewTaskWithHeaders(typ, b, headers, asynq.TaskID(taskID), asynq.Queue(queue), asynq.MaxRetry(MaxRetry), asynq.Timeout(timeout))
}

const attemptTimeout = event.AttemptTimeout

// NewDeliverTask builds the first-attempt task of a delivery.
func NewDeliverTask(deliveryID, webhook, queue string) *asynq.Task {
	return newDeliveryTask(TypeDeliver, DeliverTaskID(deliveryID), queue, DeliveryPayload{DeliveryID: deliveryID, Webhook: webhook}, attemptTimeout, nil)
}

// NewRetryTask builds the retry task of a delivery.
func NewRetryTask(deliveryID, webhook, queue string) *asynq.Task {
	return NewSweptRetryTask(deliveryID, webhook, queue, "")
}

// NewSweptRetryTask is the retry task a sweep queues (sweeper.Config.NewTask):
// it carries the sweep's trace context (tracing.LinkHeader), to which the
// retry's span links; "" (tracing off) adds no header.
func NewSweptRetryTask(deliveryID, webhook, queue string, sweep tracing.Context) *asynq.Task {
	var headers map[string]string
	if sweep != "" {
		headers = map[string]string{tracing.LinkHeader: sweep}
	}
	return newDeliveryTask(TypeRetry, RetryTaskID(deliveryID), queue, DeliveryPayload{DeliveryID: deliveryID, Webhook: webhook}, attemptTimeout, headers)
}

// DecodeDelivery parses a webhook:deliver or webhook:retry payload.
func DecodeDelivery(b []byte) (DeliveryPayload, error) {
	var p DeliveryPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if p.DeliveryID == "" || len(p.DeliveryID) > event.MaxIDLength {
		return p, fmt.Errorf("%w: delivery_id is missing or too long", ErrBadPayload)
	}
	return p, nil
}

// NewSweepTask builds the periodic sweep task. It is not retried: the next
// tick does the same work.
func NewSweepTask() *asynq.Task {
	return asynq.NewTask(TypeSweep, []byte("{}"), asynq.Queue(SystemQueue), asynq.MaxRetry(0), asynq.Timeout(time.Minute))
}

// NewRetentionTask builds the periodic retention task. It is not retried:
// the next run continues where this one stopped.
func NewRetentionTask() *asynq.Task {
	return asynq.NewTask(TypeRetention, []byte("{}"), asynq.Queue(SystemQueue), asynq.MaxRetry(0), asynq.Timeout(10*time.Minute))
}
