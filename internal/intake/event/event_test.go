package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/homingdev/homing/models"
)

func TestPrepareNamesTheField(t *testing.T) {
	t.Parallel()
	base := Event{ID: "ev-1", DocType: "Sales Order", Event: "on_submit"}
	for _, tc := range []struct {
		name     string
		ev       Event
		doc      string
		field    string
		tooLarge bool
		message  string
	}{
		{"no doc", base, "", "doc", false, "doc is missing"},
		{"null doc", base, " null ", "doc", false, "doc is missing"},
		{"array doc", base, "[1]", "doc", false, "JSON object"},
		{"broken doc", base, `{"a":`, "doc", false, "not valid JSON"},
		{"large doc", base, `{"a": "` + strings.Repeat("x", 2000) + `"}`, "doc", true, "delivery.max_payload_bytes (1024)"},
		{"no doctype", Event{ID: "x", Event: "on_submit"}, "{}", "doc_type", false, "doc_type is empty"},
		{"bad event", Event{ID: "x", DocType: "D", Event: "on_save"}, "{}", "event", false, `event "on_save" is not one of`},
		{"an operational event of a document", Event{ID: "x", DocType: "D", Event: "exhausted"}, "{}", "event", false, `event "exhausted" is not one of after_insert`},
		{"Homing's own doctype", Event{ID: "x", DocType: models.OpsDocType, Event: "exhausted"}, "{}", "doc_type", false, "reserved for Homing's own operational events"},
		{"long id", Event{ID: strings.Repeat("i", MaxIDLength+1), DocType: "D", Event: "on_submit"}, "{}", "id", false, "at most 200"},
		{"long name", Event{ID: "x", DocType: "D", DocName: strings.Repeat("n", MaxIDLength+1), Event: "on_submit"}, "{}", "doc_name", false, "doc_name is longer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Prepare(tc.ev, []byte(tc.doc), 1024)
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("Prepare = %v, want a *FieldError matching ErrInvalidEvent", err)
			}
			if fe.Field != tc.field || fe.TooLarge != tc.tooLarge || !strings.Contains(fe.Message, tc.message) {
				t.Errorf("FieldError = %+v, want field %q, too large %v, message mentioning %q", fe, tc.field, tc.tooLarge, tc.message)
			}
			if !strings.HasPrefix(err.Error(), "invalid event: "+tc.field) {
				t.Errorf("error %q does not start with the field", err)
			}
		})
	}
}

func TestPrepareFillsTheIDAndNormalisesNumbers(t *testing.T) {
	t.Parallel()
	ev, err := Prepare(Event{DocType: "Sales Order", Event: "on_submit"}, []byte(`{"total": 1500, "rate": 1.5, "lines": [{"qty": 2}]}`), 1024)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := uuid.Parse(ev.ID); err != nil || u.Version() != 7 {
		t.Errorf("ID = %q, want a new UUIDv7", ev.ID)
	}
	if ev.Doc["total"] != int64(1500) || ev.Doc["rate"] != 1.5 || ev.Doc["lines"].([]any)[0].(map[string]any)["qty"] != int64(2) {
		t.Errorf("Doc = %#v", ev.Doc)
	}
}

// TestPrepareDefaultsDocNameToDocName: an event without doc_name takes the
// document's name, on both producer paths; a given doc_name wins, and a name
// that could not be a doc_name is left out rather than refused.
func TestPrepareDefaultsDocNameToDocName(t *testing.T) {
	t.Parallel()
	base := Event{ID: "ev-1", DocType: "Sales Order", Event: "on_submit"}
	named := base
	named.DocName = "given"
	for _, tc := range []struct {
		name string
		ev   Event
		doc  string
		want string
	}{
		{"from doc.name", base, `{"name": "SO-0001", "total": 3}`, "SO-0001"},
		{"given wins", named, `{"name": "SO-0001"}`, "given"},
		{"no name", base, `{"title": "x"}`, ""},
		{"numeric name", base, `{"name": 42}`, ""},
		{"too long", base, `{"name": "` + strings.Repeat("n", MaxIDLength+1) + `"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Prepare(tc.ev, []byte(tc.doc), 4096)
			if err != nil || ev.DocName != tc.want {
				t.Errorf("Prepare: doc_name %q, %v; want %q", ev.DocName, err, tc.want)
			}
			doc, err := DecodeDoc([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			in := tc.ev
			in.Doc = doc
			ev, err = PrepareEncoded(in, []byte(tc.doc), 4096)
			if err != nil || ev.DocName != tc.want {
				t.Errorf("PrepareEncoded: doc_name %q, %v; want %q", ev.DocName, err, tc.want)
			}
		})
	}
}

// NormalizeNumbers gives documents decoded by encoding/json (json.Number,
// or float64) the shape the one-pass decoder gives: int64 when integral.
func TestNormalizeNumbers(t *testing.T) {
	for _, tc := range []struct {
		in, want any
	}{
		{json.Number("1500"), int64(1500)},
		{json.Number("1500.5"), 1500.5},
		{json.Number("1e400"), "1e400"},
		{float64(12), int64(12)},
		{12.25, 12.25},
		{float64(1 << 60), float64(1 << 60)},
		{"x", "x"},
		{map[string]any{"a": []any{json.Number("2"), 3.0}}, map[string]any{"a": []any{int64(2), int64(3)}}},
	} {
		if got := NormalizeNumbers(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("NormalizeNumbers(%#v) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

// An integer that does not fit in 64 bits would be read as a float and
// sent rounded; the producer is told instead (red team, issue 25).
func TestIntegersBeyond64BitsAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc  string
		want string // "" accepts
	}{
		{`{"a": 9223372036854775807, "b": -9223372036854775808}`, ""},
		{`{"a": 1.2345678901234567891e19, "b": 12345678901234567891.5}`, ""},
		{`{"s": "12345678901234567891", "e": "\" 12345678901234567891"}`, ""},
		{`{"a": 12345678901234567891}`, "12345678901234567891 does not fit in 64 bits"},
		{`{"a": [1, {"b": -9223372036854775809}]}`, "-9223372036854775809 does not fit in 64 bits"},
	} {
		_, err := Prepare(Event{DocType: "D", Event: "on_update"}, []byte(tc.doc), 1<<20)
		if tc.want == "" && err != nil {
			t.Errorf("%s: %v", tc.doc, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "as a string")) {
			t.Errorf("%s: %v, want a refusal naming %q", tc.doc, err, tc.want)
		}
	}
}
