package tasks

import (
	"errors"
	"testing"
)

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
