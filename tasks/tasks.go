// Package tasks defines Homing's asynq task types, their JSON payloads (kept
// readable in asynqmon, and never carrying a secret) and their handlers.
package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/dispatch"
	"github.com/homingdev/homing/internal/jsondoc"
)

// Task type names, as shown in asynqmon.
const (
	TypeEvent   = "webhook:event"
	TypeDeliver = "webhook:deliver"
	TypeRetry   = "webhook:retry"
	TypeSweep   = "webhook:sweep"
	// TypeRetention deletes old final deliveries.
	TypeRetention = "webhook:retention"
)

// DefaultQueue carries events; deliveries go to their webhook's queue.
const DefaultQueue = "default"

// SystemQueue carries Homing's periodic tasks (sweep, retention). Every
// worker serves it with a high weight, so a sweep never waits behind a
// backlog of slow deliveries: the tick stays milliseconds long in practice,
// not only in principle.
const SystemQueue = "homing_system"

// MaxRetry is asynq's retry budget for Homing's tasks. Receiver failures never
// reach asynq (they are recorded and rescheduled by the sweeper); only
// infrastructure failures and crashed workers do, and those must be re-run,
// not archived.
const MaxRetry = 25

// ErrBadPayload marks a task whose payload cannot be decoded; such a task
// is archived at once (asynq.SkipRetry).
var ErrBadPayload = errors.New("bad task payload")

// EventTaskID is the TaskID of an event's fan-out task: while one is queued,
// publishing the same event ID again is a no-op.
func EventTaskID(eventID string) string { return "webhook_event::" + eventID }

// DeliverTaskID is the TaskID of a delivery's first attempt.
func DeliverTaskID(deliveryID string) string { return "webhook_deliver::" + deliveryID }

// RetryTaskID is the TaskID of a delivery's retry: the sweeper's concurrency
// guard, so two sweeps never queue the same retry twice.
func RetryTaskID(deliveryID string) string { return "webhook_retry::" + deliveryID }

// EventPayload is the payload of a webhook:event task: the document snapshot.
type EventPayload struct {
	ID      string          `json:"id"`
	DocType string          `json:"doc_type"`
	DocName string          `json:"doc_name,omitempty"`
	Event   string          `json:"event"`
	Doc     json.RawMessage `json:"doc"`
}

// DeliveryPayload is the payload of webhook:deliver and webhook:retry tasks.
type DeliveryPayload struct {
	DeliveryID string `json:"delivery_id"`
	Webhook    string `json:"webhook,omitempty"` // for people reading asynqmon
}

// NewEventTask builds the fan-out task of ev.
func NewEventTask(ev dispatch.Event) (*asynq.Task, error) {
	b, err := EncodeEvent(ev)
	if err != nil {
		return nil, err
	}
	return EventTask(ev.ID, b), nil
}

// EncodeEvent is the webhook:event payload of ev: what the outbox stores and
// the relay queues unchanged.
func EncodeEvent(ev dispatch.Event) ([]byte, error) {
	doc, err := json.Marshal(ev.Doc)
	if err != nil {
		return nil, fmt.Errorf("encode document: %w", err)
	}
	return EncodeEventJSON(ev, doc)
}

// EncodeEventJSON is EncodeEvent for a caller that has already encoded the
// document as JSON (doc); ev.Doc is not read.
func EncodeEventJSON(ev dispatch.Event, doc json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(EventPayload{ID: ev.ID, DocType: ev.DocType, DocName: ev.DocName, Event: ev.Event, Doc: doc})
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return b, nil
}

// NewEventTaskJSON is NewEventTask for a caller that has already encoded the
// document as JSON (doc); ev.Doc is not read.
func NewEventTaskJSON(ev dispatch.Event, doc json.RawMessage) (*asynq.Task, error) {
	b, err := EncodeEventJSON(ev, doc)
	if err != nil {
		return nil, err
	}
	return EventTask(ev.ID, b), nil
}

// EventTask is the fan-out task of event eventID whose payload is already
// encoded (EncodeEvent).
func EventTask(eventID string, payload []byte) *asynq.Task {
	return asynq.NewTask(TypeEvent, payload,
		asynq.TaskID(EventTaskID(eventID)), asynq.Queue(DefaultQueue), asynq.MaxRetry(MaxRetry), asynq.Timeout(eventTimeout))
}

// DecodeEvent parses a webhook:event payload.
func DecodeEvent(b []byte) (dispatch.Event, error) {
	ev, ok := decodeEventFast(b)
	if !ok {
		var err error
		if ev, err = decodeEventJSON(b); err != nil {
			return dispatch.Event{}, err
		}
	}
	if err := ev.Validate(); err != nil {
		return dispatch.Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	return ev, nil
}

// decodeEventJSON is DecodeEvent by encoding/json, for the payloads
// decodeEventFast leaves.
func decodeEventJSON(b []byte) (dispatch.Event, error) {
	var p EventPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return dispatch.Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	doc, err := dispatch.DecodeDoc(p.Doc)
	if err != nil {
		return dispatch.Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	return dispatch.Event{ID: p.ID, DocType: p.DocType, DocName: p.DocName, Event: p.Event, Doc: doc}, nil
}

// decodeEventFast parses the payload and its document in one pass
// (jsondoc) when it has the shape EncodeEventJSON writes: an object whose
// keys are exactly EventPayload's, strings where it has strings, an object
// for doc. It reports false for anything else, which then takes
// encoding/json's path (case-insensitive keys, null fields, errors) and
// gets the answer it always got. Decoding was a tenth of the worker's CPU.
func decodeEventFast(b []byte) (dispatch.Event, bool) {
	v, ok := jsondoc.Decode(b)
	if !ok {
		return dispatch.Event{}, false
	}
	m, _ := v.(map[string]any)
	var ev dispatch.Event
	for k, v := range m {
		var field *string
		switch k {
		case "id":
			field = &ev.ID
		case "doc_type":
			field = &ev.DocType
		case "doc_name":
			field = &ev.DocName
		case "event":
			field = &ev.Event
		case "doc":
			if ev.Doc, ok = v.(map[string]any); !ok {
				return dispatch.Event{}, false
			}
			continue
		default:
			return dispatch.Event{}, false
		}
		if *field, ok = v.(string); !ok {
			return dispatch.Event{}, false
		}
	}
	return ev, ev.Doc != nil
}

func newDeliveryTask(typ, taskID, queue string, p DeliveryPayload, timeout time.Duration) *asynq.Task {
	b, _ := json.Marshal(p) // two strings: cannot fail
	return asynq.NewTask(typ, b, asynq.TaskID(taskID), asynq.Queue(queue), asynq.MaxRetry(MaxRetry), asynq.Timeout(timeout))
}

// attemptTimeout bounds a delivery task: the longest webhook timeout (5m)
// plus room for the database writes.
const attemptTimeout = 6 * time.Minute

// eventTimeout bounds an event task: the fan-out, and the first attempt it
// makes itself (see HandleEvent).
const eventTimeout = attemptTimeout + time.Minute

// NewDeliverTask builds the first-attempt task of a delivery.
func NewDeliverTask(deliveryID, webhook, queue string) *asynq.Task {
	return newDeliveryTask(TypeDeliver, DeliverTaskID(deliveryID), queue, DeliveryPayload{DeliveryID: deliveryID, Webhook: webhook}, attemptTimeout)
}

// NewRetryTask builds the retry task of a delivery.
func NewRetryTask(deliveryID, webhook, queue string) *asynq.Task {
	return newDeliveryTask(TypeRetry, RetryTaskID(deliveryID), queue, DeliveryPayload{DeliveryID: deliveryID, Webhook: webhook}, attemptTimeout)
}

// DecodeDelivery parses a webhook:deliver or webhook:retry payload.
func DecodeDelivery(b []byte) (DeliveryPayload, error) {
	var p DeliveryPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if p.DeliveryID == "" || len(p.DeliveryID) > dispatch.MaxIDLength {
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
