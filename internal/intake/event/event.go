// Package event is a document event ("Sales Order SO-1 was submitted"):
// its validation, the one preparation every producer's event takes, and its
// wire form, the webhook:event task that carries it to a worker (and that
// the outbox stores). It is what a publisher needs and nothing more, so
// that services importing Homing's client do not pull in the engine.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/homingdev/homing/internal/lib/jsondoc"
	"github.com/homingdev/homing/models"
)

// Limits on an event's identifiers.
const (
	MaxIDLength   = 200
	MaxNameLength = 140
)

// ErrInvalidEvent marks an event that can never be fanned out.
var ErrInvalidEvent = errors.New("invalid event")

// FieldError is an invalid event, naming the field at fault as the event's
// JSON names it (id, doc_type, doc_name, event, doc), so that an API can point
// at it. It matches ErrInvalidEvent with errors.Is.
type FieldError struct {
	// Field is the JSON name of the field at fault.
	Field string
	// Message says what is wrong and what to do, starting with the field's
	// name: "doc_type is empty".
	Message string
	// TooLarge marks a document over the payload limit.
	TooLarge bool
}

func (e *FieldError) Error() string { return ErrInvalidEvent.Error() + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalidEvent) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidEvent }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Event is one document event: "Sales Order SO-1 was submitted".
type Event struct {
	// Tenant is the tenant the event belongs to: only its webhooks match
	// it, and its ID is unique within it. Empty means models.DefaultTenant.
	Tenant  string         `json:"tenant,omitempty"`
	ID      string         `json:"id"`
	DocType string         `json:"doc_type"`
	DocName string         `json:"doc_name,omitempty"`
	Event   string         `json:"event"`
	Doc     map[string]any `json:"doc"`
	// AcceptedAt is when Homing accepted the event (its 202, PublishTx's
	// commit, Publish's enqueue), carried by its task's AcceptedHeader and
	// kept on its deliveries for the latency users feel; zero when not
	// known (a task queued by an older version).
	AcceptedAt time.Time `json:"-"`
	// AcceptSeq is the event's place in the acceptance order (its outbox
	// row's id, carried by its task's AcceptSeqHeader); 0 when it came
	// straight into Redis, and an ordered webhook's delivery draws its
	// place at fan-out.
	AcceptSeq int64 `json:"-"`
	// TraceContext is the W3C trace context the event was published in
	// (package tracing's Context), carried beside the payload: in the
	// outbox row's trace_context and the task's headers, never in the
	// document. "" when there is none.
	TraceContext string `json:"-"`
}

// Validate reports what is wrong with the event, naming the field.
func (e Event) Validate() error {
	if e.Tenant != "" && !ValidTenant(e.Tenant) {
		return invalid("tenant", "tenant %q is not a tenant name (a-z, 0-9, '-' and '_', at most 63, starting with a letter or digit)", e.Tenant)
	}
	for _, f := range [...]struct{ name, value string }{{"id", e.ID}, {"doc_type", e.DocType}, {"doc_name", e.DocName}, {"event", e.Event}} {
		if why := BadText(f.value); why != "" {
			return invalid(f.name, "%s %s; PostgreSQL cannot store it (remove it, or send valid UTF-8)", f.name, why)
		}
	}
	switch {
	case e.ID == "":
		return invalid("id", "id is empty")
	case len(e.ID) > MaxIDLength:
		return invalid("id", "id is %d characters long, at most %d allowed", len(e.ID), MaxIDLength)
	case strings.TrimSpace(e.DocType) == "":
		return invalid("doc_type", "doc_type is empty")
	case len(e.DocType) > MaxNameLength:
		return invalid("doc_type", "doc_type is longer than %d characters", MaxNameLength)
	case len(e.DocName) > MaxIDLength:
		return invalid("doc_name", "doc_name is longer than %d characters", MaxIDLength)
	case !slices.Contains(models.EventsOf(e.DocType), e.Event):
		return invalid("event", "event %q is not one of %s", e.Event, strings.Join(models.EventsOf(e.DocType), ", "))
	case e.Doc == nil:
		return invalid("doc", "doc is missing (give the document as a JSON object)")
	}
	return nil
}

// Prepare is the one path every producer's event takes (client.Publish,
// client.PublishTx, POST /v1/events): it fills an empty ID with a new
// UUIDv7, checks the document against maxPayloadBytes, gives it the shape the
// worker will see after decoding it from Redis (so the synchronous path
// renders exactly what the queued path would) and validates the event. doc
// is the document's JSON encoding; ev.Doc is ignored. The size counted is
// that of doc as given.
func Prepare(ev Event, doc []byte, maxPayloadBytes int) (Event, error) {
	if t := bytes.TrimSpace(doc); len(t) == 0 || string(t) == "null" {
		return Event{}, invalid("doc", "doc is missing (give the document as a JSON object)")
	}
	if err := checkSize(doc, maxPayloadBytes); err != nil {
		return Event{}, err
	}
	m, err := DecodeDoc(doc)
	if err != nil {
		return Event{}, invalid("doc", "doc: %v", err)
	}
	ev.Doc = m
	return complete(ev)
}

// PrepareEncoded is Prepare for a producer holding the document both as a
// map (ev.Doc) and as its JSON encoding (doc): it checks the same things
// without decoding doc again, and leaves ev.Doc as given. A queued event
// needs no more, since the worker decodes doc itself; a synchronous one must
// still be given DecodeDoc's shape. (Decoding and re-encoding was a third of
// client.Publish's time.)
func PrepareEncoded(ev Event, doc []byte, maxPayloadBytes int) (Event, error) {
	if err := checkSize(doc, maxPayloadBytes); err != nil {
		return Event{}, err
	}
	return complete(ev)
}

func checkSize(doc []byte, maxPayloadBytes int) error {
	if len(doc) > maxPayloadBytes {
		return &FieldError{Field: "doc", TooLarge: true,
			Message: fmt.Sprintf("doc is %d bytes, more than delivery.max_payload_bytes (%d)", len(doc), maxPayloadBytes)}
	}
	if !utf8.Valid(doc) {
		return invalid("doc", "doc is not valid UTF-8; send the document encoded as UTF-8")
	}
	if JSONHasNUL(doc) {
		return invalid("doc", "doc contains a NUL character (\\u0000) in a key or string; PostgreSQL cannot store it, remove it")
	}
	if err := checkIntegers(doc); err != nil {
		return invalid("doc", "doc: %v", err)
	}
	return nil
}

// BadText says why s cannot be stored as PostgreSQL text (NUL, or invalid
// UTF-8), or "" when it can.
func BadText(s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte (\\u0000)"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}

// JSONHasNUL reports whether the JSON value doc holds a NUL in a key or a
// string value (which PostgreSQL refuses in text). A document without the
// escape \u0000 pays one bytes.Contains; one with it is decoded to be sure.
func JSONHasNUL(doc []byte) bool {
	if !bytes.Contains(doc, []byte(`\u0000`)) {
		return false
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return false // not JSON: the decoder's own error says so
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.IndexByte(x, 0) >= 0
		case map[string]any:
			for k, e := range x {
				if strings.IndexByte(k, 0) >= 0 || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// complete fills an empty ID with a new UUIDv7, an empty DocName with the
// document's name, and validates the event.
func complete(ev Event) (Event, error) {
	if ev.ID == "" {
		ev.ID = uuid.Must(uuid.NewV7()).String()
	}
	if ev.DocName == "" {
		ev.DocName = docName(ev.Doc)
	}
	if ev.DocType == models.OpsDocType {
		return Event{}, invalid("doc_type", "doc_type %q is reserved for Homing's own operational events (failing, recovered, disabled, exhausted); publish your documents under another doctype", ev.DocType)
	}
	if err := ev.Validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// DecodeDoc parses a document given as JSON. Numbers become int64 when they
// are integral and float64 otherwise, so a template renders 1500 as "1500",
// not "1500.0", and a condition can still compare them.
func DecodeDoc(b []byte) (map[string]any, error) {
	if v, ok := jsondoc.Decode(b); ok {
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	// What jsondoc leaves (errors, rare escapes) gets encoding/json's
	// answer, as it always has.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("document is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("document is not valid JSON: more than one value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("document must be a JSON object")
	}
	return NormalizeNumbers(m).(map[string]any), nil
}

// NormalizeNumbers replaces json.Number values (and float64 values that are
// integral) with int64, and other numbers with float64, throughout v.
func NormalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = NormalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = NormalizeNumbers(e)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case float64:
		if x == float64(int64(x)) && x < 1<<53 && x > -(1<<53) {
			return int64(x)
		}
		return x
	default:
		return v
	}
}

// docName is doc's "name" field (a Frappe document's primary key), so that
// deliveries list and filter by document without every producer repeating
// it as doc_name; "" when the document has no name that is a usable
// doc_name (not a string, too long, or not storable text).
func docName(doc map[string]any) string {
	name, _ := doc["name"].(string)
	if len(name) > MaxIDLength || BadText(name) != "" {
		return ""
	}
	return name
}

// ValidTenant reports whether name can name a tenant: 1 to 63 of a-z, 0-9,
// '-' and '_', starting with a letter or digit (the tenants table's CHECK).
// A tenant name never holds ':', which keeps TaskID unambiguous.
func ValidTenant(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '-' || name[0] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
