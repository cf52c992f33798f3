package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode: a corrupted webhook:event payload is refused with
// ErrBadPayload (the task is archived), never a panic, and anything accepted
// is a valid event. The one-pass decoder, when it answers, answers as
// encoding/json does.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"e1","doc_type":"D","event":"on_update","doc":{"name":"x"}}`,
		`{"id":"","doc_type":"D","event":"on_update","doc":{}}`,
		`{"id":"e1","doc_type":"D","event":"nope","doc":{}}`,
		`{"id":"e1","doc_type":"D","event":"on_update","doc":[1]}`,
		`{"id":"e1","doc_type":"D","event":"on_update","doc":{"n":1e999}}`,
		`{"id":"e1","doc_type":"D","doc_name":"N\u00e9","event":"on_update","doc":{"a":[1,2.5,"\n",null,true]}}`,
		`{"ID":"e1","doc_type":"D","event":"on_update","doc":{}}`,
		`{"id":"e1","doc_type":"D","event":"on_update","doc":{},"extra":1}`,
		`{"id":null,"doc_type":"D","event":"on_update","doc":{}}`,
		`{"id":"e1","doc_type":"D","event":"on_update","doc":null}`,
		`{"id":"e1","id":"e2","doc_type":"D","event":"on_update","doc":{}}`,
		`null`, ``, `{`, `[]`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if fast, ok := decodeFast(b); ok {
			slow, err := decodeJSON(b)
			if err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("one pass gave %#v, encoding/json %#v, %v", fast, slow, err)
			}
		}
		ev, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("error %v does not wrap ErrBadPayload", err)
			}
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("accepted an invalid event: %v", err)
		}
		if _, err := json.Marshal(ev.Doc); err != nil {
			t.Fatalf("accepted a document that cannot be re-encoded: %v", err)
		}
	})
}

// What Encode writes takes the one-pass path, and decodes to the event
// encoded.
func TestEncodedEventsTakeTheOnePassDecoder(t *testing.T) {
	ev := Event{ID: "e1", DocType: "Sales Order", DocName: "SO-1", Event: "on_submit",
		Doc: map[string]any{"name": "SO-1", "grand_total": int64(1500), "rate": 12.5, "items": []any{map[string]any{"qty": int64(2)}}, "note": "<b>\"x\"</b>\n"}}
	b, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := decodeFast(b)
	if !ok {
		t.Fatalf("decodeFast(%s) fell back to encoding/json", b)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("decoded %#v, want %#v", got, ev)
	}
}
