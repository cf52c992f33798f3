package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/homingdev/homing/models"
)

// Limits on an event's identifiers.
const (
	MaxIDLength   = 200
	MaxNameLength = 140
)

// ErrInvalidEvent marks an event that can never be fanned out.
var ErrInvalidEvent = errors.New("invalid event")

// Event is one document event: "Sales Order SO-1 was submitted".
type Event struct {
	ID      string         `json:"id"`
	DocType string         `json:"doc_type"`
	DocName string         `json:"doc_name,omitempty"`
	Event   string         `json:"event"`
	Doc     map[string]any `json:"doc"`
}

// Validate reports what is wrong with the event, naming the field.
func (e Event) Validate() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: id is empty", ErrInvalidEvent)
	case len(e.ID) > MaxIDLength:
		return fmt.Errorf("%w: id is %d characters long, at most %d allowed", ErrInvalidEvent, len(e.ID), MaxIDLength)
	case strings.TrimSpace(e.DocType) == "":
		return fmt.Errorf("%w: doc_type is empty", ErrInvalidEvent)
	case len(e.DocType) > MaxNameLength:
		return fmt.Errorf("%w: doc_type is longer than %d characters", ErrInvalidEvent, MaxNameLength)
	case len(e.DocName) > MaxIDLength:
		return fmt.Errorf("%w: doc_name is longer than %d characters", ErrInvalidEvent, MaxIDLength)
	case !slices.Contains(models.DocEvents, e.Event):
		return fmt.Errorf("%w: event %q is not one of %s", ErrInvalidEvent, e.Event, strings.Join(models.DocEvents, ", "))
	case e.Doc == nil:
		return fmt.Errorf("%w: doc is missing (give the document as a JSON object)", ErrInvalidEvent)
	}
	return nil
}

// DecodeDoc parses a document given as JSON. Numbers become int64 when they
// are integral and float64 otherwise, so a template renders 1500 as "1500",
// not "1500.0", and a condition can still compare them.
func DecodeDoc(b []byte) (map[string]any, error) {
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
