package tenant

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/homingdev/homing/models"
)

// EventType is one doctype × event pair a tenant publishes: what a webhook
// of the tenant's portal subscribes to, picked from a list.
type EventType struct {
	DocType string `json:"doc_type"`
	Event   string `json:"event"`
}

// String is the pair as settings write it, "Sales Order:on_submit".
func (e EventType) String() string { return e.DocType + ":" + e.Event }

// MaxEventTypes is how many pairs an operator may declare for one tenant.
const MaxEventTypes = 500

// maxDocType is the longest doctype a pair may name (a webhook's doctype's
// bound, webhook.MaxNameLength).
const maxDocType = 140

// ParseEventType reads "Doctype:event", refusing one whose event is not a
// document event (or an event of models.OpsDocType for that doctype) and
// saying what would be accepted.
func ParseEventType(s string) (EventType, error) {
	doc, ev, ok := cutLast(strings.TrimSpace(s), ":")
	doc, ev = strings.TrimSpace(doc), strings.TrimSpace(ev)
	if !ok || doc == "" || ev == "" {
		return EventType{}, fmt.Errorf("%w: event type %q must be Doctype:event, such as \"Sales Order:on_submit\"", ErrInvalid, s)
	}
	if len(doc) > maxDocType || strings.IndexFunc(doc, unicode.IsControl) >= 0 {
		return EventType{}, fmt.Errorf("%w: event type %q: the doctype must be 1 to %d printable characters", ErrInvalid, s, maxDocType)
	}
	if events := models.EventsOf(doc); !slices.Contains(events, ev) {
		return EventType{}, fmt.Errorf("%w: event type %q: %q is not one of %s", ErrInvalid, s, ev, strings.Join(events, ", "))
	}
	return EventType{DocType: doc, Event: ev}, nil
}

// cutLast cuts s around the last sep: a doctype may hold a colon, an event
// never does.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// eventTypes validates list, drops repeats and writes each pair alike.
func eventTypes(list []string) (models.StringList, error) {
	out := models.StringList{}
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			continue
		}
		et, err := ParseEventType(s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, et.String()) {
			out = append(out, et.String())
		}
	}
	if len(out) > MaxEventTypes {
		return nil, fmt.Errorf("%w: event_types: %d pairs, at most %d", ErrInvalid, len(out), MaxEventTypes)
	}
	return out, nil
}
