package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/lib/jsondoc"
	"github.com/homingdev/homing/internal/lib/tracing"
)

// TaskType is the asynq type name of an event's fan-out task, as shown in
// asynqmon.
const TaskType = "webhook:event"

// Queue carries events; deliveries go to their webhook's queue.
const Queue = "default"

// MaxRetry is asynq's retry budget for Homing's tasks. Receiver failures never
// reach asynq (they are recorded and rescheduled by the sweeper); only
// infrastructure failures and crashed workers do, and those must be re-run,
// not archived.
const MaxRetry = 25

// AttemptTimeout bounds a delivery task: the longest webhook timeout (5m)
// plus room for the database writes.
const AttemptTimeout = 6 * time.Minute

// TaskTimeout bounds an event task: the fan-out, and the first attempt it
// makes itself.
const TaskTimeout = AttemptTimeout + time.Minute

// OutboxHeader marks a webhook:event task queued by the outbox relay: its
// event is recorded in PostgreSQL until the fan-out says that the
// deliveries are committed. Tasks from client.Publish carry no header and
// cost no statement.
const OutboxHeader = "homing-outbox"

// AcceptedHeader carries when the event was accepted, in Unix
// microseconds: a header, not a field of the payload, so that the payload
// (whose hash tells a repeated publish from a conflicting one) stays the
// same however often it is published.
const AcceptedHeader = "homing-accepted-at"

// AcceptSeqHeader carries the event's place in Homing's acceptance order:
// its outbox_events id, for an event accepted through the durable intake.
// An ordered webhook's deliveries keep it (deliveries.accept_seq); an event
// without it (client.Publish) draws one from the same sequence at fan-out.
const AcceptSeqHeader = "homing-accept-seq"

// AcceptSeq reads a task's AcceptSeqHeader; 0 when it has none.
func AcceptSeq(headers map[string]string) int64 {
	v, err := strconv.ParseInt(headers[AcceptSeqHeader], 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

// acceptedHeader is the header value of at.
func acceptedHeader(at time.Time) string { return strconv.FormatInt(at.UnixMicro(), 10) }

// AcceptedAt reads a task's AcceptedHeader; zero when it has none.
func AcceptedAt(headers map[string]string) time.Time {
	v, err := strconv.ParseInt(headers[AcceptedHeader], 10, 64)
	if err != nil || v <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// ErrBadPayload marks a task whose payload cannot be decoded; such a task
// is archived at once (asynq.SkipRetry).
var ErrBadPayload = errors.New("bad task payload")

// TaskID is the TaskID of tenant's event's fan-out task: while one is
// queued, publishing the same event ID in the same tenant again is a no-op.
// The default tenant's keeps the form it had before tenants
// (webhook_event::<id>), so tasks queued then are still recognised; any
// other's is webhook_event:<tenant>:<id>, which never collides with it
// since a tenant name is not empty and holds no ':'.
func TaskID(tenant, eventID string) string {
	if tenant == "" || tenant == "default" {
		return "webhook_event::" + eventID
	}
	return "webhook_event:" + tenant + ":" + eventID
}

// Payload is the payload of a webhook:event task: the document snapshot.
type Payload struct {
	// Tenant is omitted for the default tenant, so tasks queued before
	// tenants existed decode as the default tenant's.
	Tenant  string          `json:"tenant,omitempty"`
	ID      string          `json:"id"`
	DocType string          `json:"doc_type"`
	DocName string          `json:"doc_name,omitempty"`
	Event   string          `json:"event"`
	Doc     json.RawMessage `json:"doc"`
}

// Encode is the webhook:event payload of ev: what the outbox stores and the
// relay queues unchanged.
func Encode(ev Event) ([]byte, error) {
	doc, err := json.Marshal(ev.Doc)
	if err != nil {
		return nil, fmt.Errorf("encode document: %w", err)
	}
	return EncodeJSON(ev, doc)
}

// EncodeJSON is Encode for a caller that has already encoded the document as
// JSON (doc); ev.Doc is not read.
func EncodeJSON(ev Event, doc json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(Payload{Tenant: tenantField(ev.Tenant), ID: ev.ID, DocType: ev.DocType, DocName: ev.DocName, Event: ev.Event, Doc: doc})
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return b, nil
}

// NewTaskJSON is the fan-out task of ev for a publisher queueing it straight
// into Redis (client.Publish), with the document already encoded as JSON
// (doc); ev.Doc is not read.
func NewTaskJSON(ev Event, doc json.RawMessage) (*asynq.Task, error) {
	b, err := EncodeJSON(ev, doc)
	if err != nil {
		return nil, err
	}
	at := ev.AcceptedAt
	if at.IsZero() {
		at = time.Now()
	}
	return asynq.NewTaskWithHeaders(TaskType, b, tracing.AddHeaders(map[string]string{AcceptedHeader: acceptedHeader(at)}, ev.TraceContext),
		asynq.TaskID(TaskID(ev.Tenant, ev.ID)), asynq.Queue(Queue), asynq.MaxRetry(MaxRetry), asynq.Timeout(TaskTimeout)), nil
}

// OutboxTask is the fan-out task of an event the outbox holds, whose payload
// the outbox stored (Encode), accepted at acceptedAt (its outbox row's
// created_at) as the seq-th (its outbox row's id, AcceptSeqHeader) and
// carrying the trace context trace in its headers ("" adds none).
func OutboxTask(tenant, eventID string, payload []byte, acceptedAt time.Time, seq int64, trace tracing.Context) *asynq.Task {
	headers := map[string]string{OutboxHeader: "1", AcceptedHeader: acceptedHeader(acceptedAt)}
	if seq > 0 {
		headers[AcceptSeqHeader] = strconv.FormatInt(seq, 10)
	}
	return asynq.NewTaskWithHeaders(TaskType, payload, tracing.AddHeaders(headers, trace),
		asynq.TaskID(TaskID(tenant, eventID)), asynq.Queue(Queue), asynq.MaxRetry(MaxRetry), asynq.Timeout(TaskTimeout))
}

// Decode parses a webhook:event payload.
func Decode(b []byte) (Event, error) {
	ev, ok := decodeFast(b)
	if !ok {
		var err error
		if ev, err = decodeJSON(b); err != nil {
			return Event{}, err
		}
	}
	if err := ev.Validate(); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	return ev, nil
}

// decodeJSON is Decode by encoding/json, for the payloads decodeFast leaves.
func decodeJSON(b []byte) (Event, error) {
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	doc, err := DecodeDoc(p.Doc)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	return Event{Tenant: tenantField(p.Tenant), ID: p.ID, DocType: p.DocType, DocName: p.DocName, Event: p.Event, Doc: doc}, nil
}

// decodeFast parses the payload and its document in one pass (jsondoc)
// when it has the shape EncodeJSON writes: an object whose keys are exactly
// Payload's, strings where it has strings, an object for doc. It reports
// false for anything else, which then takes encoding/json's path
// (case-insensitive keys, null fields, errors) and gets the answer it always
// got. Decoding was a tenth of the worker's CPU.
func decodeFast(b []byte) (Event, bool) {
	v, ok := jsondoc.Decode(b)
	if !ok {
		return Event{}, false
	}
	m, _ := v.(map[string]any)
	var ev Event
	for k, v := range m {
		var field *string
		switch k {
		case "tenant":
			field = &ev.Tenant
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
				return Event{}, false
			}
			continue
		default:
			return Event{}, false
		}
		if *field, ok = v.(string); !ok {
			return Event{}, false
		}
	}
	ev.Tenant = tenantField(ev.Tenant)
	return ev, ev.Doc != nil
}

// tenantField is how an event's tenant travels: empty for the default
// tenant, as before tenants existed.
func tenantField(tenant string) string {
	if tenant == "default" {
		return ""
	}
	return tenant
}
