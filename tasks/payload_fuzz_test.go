package tasks

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeEvent: a corrupted webhook:event payload is refused with
// ErrBadPayload (the task is archived), never a panic, and anything accepted
// is a valid event.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"id":"e1","doc_type":"D","event":"on_update","doc":{"name":"x"}}`,
		`{"id":"","doc_type":"D","event":"on_update","doc":{}}`,
		`{"id":"e1","doc_type":"D","event":"nope","doc":{}}`,
		`{"id":"e1","doc_type":"D","event":"on_update","doc":[1]}`,
		`{"id":"e1","doc_type":"D","event":"on_update","doc":{"n":1e999}}`,
		`null`, ``, `{`, `[]`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
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

// FuzzDecodeDelivery: the same for webhook:deliver and webhook:retry.
func FuzzDecodeDelivery(f *testing.F) {
	for _, s := range []string{`{"delivery_id":"d1","webhook":"w"}`, `{"delivery_id":""}`, `{"delivery_id":5}`, `{}`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeDelivery(b)
		if err != nil {
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("error %v does not wrap ErrBadPayload", err)
			}
			return
		}
		if p.DeliveryID == "" {
			t.Fatal("accepted an empty delivery_id")
		}
	})
}
