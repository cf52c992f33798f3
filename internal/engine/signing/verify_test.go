package signing_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
)

var (
	verifyTS   = time.Unix(1_750_000_000, 0)
	verifyBody = []byte(`{"name":"SO-1"}`)
)

func signed(t *testing.T, scheme string, secrets ...signing.Secret) http.Header {
	t.Helper()
	h := http.Header{}
	signing.Sign(h, scheme, secrets, "dlv_1", verifyTS, verifyBody)
	return h
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	oldSecret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	newSecret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	h := signed(t, signing.SchemeBoth, newSecret, oldSecret)
	if n := len(strings.Fields(h.Get(signing.HeaderSignature))); n != 2 {
		t.Fatalf("webhook-signature has %d entries, want 2", n)
	}
	if !strings.HasPrefix(h.Get(signing.HeaderSignature), signing.Standard(newSecret, "dlv_1", verifyTS, verifyBody)+" ") {
		t.Error("the current secret's signature is not first")
	}
	for name, s := range map[string]signing.Secret{"old": oldSecret, "new": newSecret} {
		if err := signing.VerifyAt(s, h, verifyBody, time.Minute, verifyTS); err != nil {
			t.Errorf("receiver holding only the %s secret: %v", name, err)
		}
		if err := reference(t, s).VerifyIgnoringTimestamp(verifyBody, h); err != nil {
			t.Errorf("reference receiver holding only the %s secret: %v", name, err)
		}
	}
	if err := signing.VerifyAt(other, h, verifyBody, time.Minute, verifyTS); !errors.Is(err, signing.ErrNoMatch) {
		t.Errorf("receiver with an unrelated secret: %v, want ErrNoMatch", err)
	}
	if got, want := h.Get(signing.HeaderFrappe), signing.Frappe(newSecret, verifyBody); got != want {
		t.Errorf("Frappe header = %q, want the current secret's %q", got, want)
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	const secret = signing.Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	for _, tc := range []struct {
		name     string
		edit     func(h http.Header)
		body     string
		verifier signing.Secret // "" means the signing secret
		want     error
	}{
		{name: "tampered body", body: `{"name":"SO-2"}`, want: signing.ErrNoMatch},
		{name: "body with a trailing newline", body: string(verifyBody) + "\n", want: signing.ErrNoMatch},
		{name: "tampered id", edit: func(h http.Header) { h.Set(signing.HeaderID, "dlv_2") }, want: signing.ErrNoMatch},
		{name: "tampered timestamp within tolerance", edit: func(h http.Header) { h.Set(signing.HeaderTimestamp, "1750000001") }, want: signing.ErrNoMatch},
		{name: "tampered timestamp outside tolerance", edit: func(h http.Header) { h.Set(signing.HeaderTimestamp, "1749990000") }, want: signing.ErrTimestamp},
		{name: "timestamp not a number", edit: func(h http.Header) { h.Set(signing.HeaderTimestamp, "2025-06-15T00:00:00Z") }, want: signing.ErrTimestamp},
		{name: "timestamp in milliseconds", edit: func(h http.Header) { h.Set(signing.HeaderTimestamp, "1750000000000") }, want: signing.ErrTimestamp},
		{name: "missing id", edit: func(h http.Header) { h.Del(signing.HeaderID) }, want: signing.ErrMissingHeaders},
		{name: "missing timestamp", edit: func(h http.Header) { h.Del(signing.HeaderTimestamp) }, want: signing.ErrMissingHeaders},
		{name: "no signature headers", edit: func(h http.Header) { h.Del(signing.HeaderSignature); h.Del(signing.HeaderFrappe) }, want: signing.ErrMissingHeaders},
		{name: "blank signature", edit: func(h http.Header) { h.Set(signing.HeaderSignature, "  "); h.Del(signing.HeaderFrappe) }, want: signing.ErrMissingHeaders},
		{name: "only another version", edit: func(h http.Header) {
			h.Set(signing.HeaderSignature, strings.Replace(h.Get(signing.HeaderSignature), "v1,", "v1a,", 1))
		}, want: signing.ErrNoMatch},
		{name: "garbled base64", edit: func(h http.Header) { h.Set(signing.HeaderSignature, "v1,!!!") }, want: signing.ErrNoMatch},
		{name: "truncated signature", edit: func(h http.Header) { h.Set(signing.HeaderSignature, h.Get(signing.HeaderSignature)[:20]) }, want: signing.ErrNoMatch},
		{name: "wrong secret", verifier: "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", want: signing.ErrNoMatch},
		{name: "same key as a raw secret", verifier: signing.Secret(mustDecode(t, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")), edit: func(h http.Header) { h.Del(signing.HeaderSignature) }, want: signing.ErrNoMatch},
		// A bad webhook-signature is not rescued by a valid Frappe header.
		{name: "no downgrade to frappe", edit: func(h http.Header) { h.Set(signing.HeaderSignature, "v1,AAAA") }, want: signing.ErrNoMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := signed(t, signing.SchemeBoth, secret)
			if err := signing.VerifyAt(secret, h, verifyBody, time.Minute, verifyTS); err != nil {
				t.Fatalf("untouched request does not verify: %v", err)
			}
			if tc.edit != nil {
				tc.edit(h)
			}
			body := verifyBody
			if tc.body != "" {
				body = []byte(tc.body)
			}
			s := secret
			if tc.verifier != "" {
				s = tc.verifier
			}
			err := signing.VerifyAt(s, h, body, time.Minute, verifyTS)
			if !errors.Is(err, tc.want) {
				t.Fatalf("VerifyAt = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestVerifyRefusesEmptySecret(t *testing.T) {
	t.Parallel()
	// An empty key would let anyone sign; the verifier must fail closed.
	h := signed(t, signing.SchemeBoth, "")
	h.Set(signing.HeaderTimestamp, "1750000000")
	h.Set(signing.HeaderSignature, signing.Standard("", "dlv_1", verifyTS, verifyBody))
	if err := signing.VerifyAt("", h, verifyBody, time.Minute, verifyTS); !errors.Is(err, signing.ErrInvalidSecret) {
		t.Errorf("VerifyAt with an empty secret = %v, want ErrInvalidSecret", err)
	}
}

func TestVerifyTolerance(t *testing.T) {
	t.Parallel()
	const secret = signing.Secret("frappe-style-secret")
	h := signed(t, signing.SchemeStandard, secret)
	for _, tc := range []struct {
		name      string
		tolerance time.Duration
		now       time.Time
		want      error
	}{
		{"exact", time.Minute, verifyTS, nil},
		{"old at the limit", time.Minute, verifyTS.Add(time.Minute), nil},
		{"too old", time.Minute, verifyTS.Add(time.Minute + time.Second), signing.ErrTimestamp},
		{"too old by a nanosecond", time.Minute, verifyTS.Add(time.Minute + 1), signing.ErrTimestamp},
		{"new at the limit", time.Minute, verifyTS.Add(-time.Minute), nil},
		{"too new", time.Minute, verifyTS.Add(-time.Minute - time.Second), signing.ErrTimestamp},
		{"zero means five minutes, old", 0, verifyTS.Add(5 * time.Minute), nil},
		{"zero means five minutes, too old", 0, verifyTS.Add(5*time.Minute + time.Second), signing.ErrTimestamp},
		{"zero means five minutes, too new", 0, verifyTS.Add(-5*time.Minute - time.Second), signing.ErrTimestamp},
		{"an hour", time.Hour, verifyTS.Add(59 * time.Minute), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := signing.VerifyAt(secret, h, verifyBody, tc.tolerance, tc.now)
			if tc.want == nil && err != nil {
				t.Fatalf("VerifyAt = %v, want nil", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("VerifyAt = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestVerifyFrappeFallback(t *testing.T) {
	t.Parallel()
	const secret = signing.Secret("frappe-style-secret")
	h := signed(t, signing.SchemeFrappe, secret)
	if h.Get(signing.HeaderSignature) != "" || h.Get(signing.HeaderTimestamp) != "" {
		t.Fatal("SchemeFrappe set Standard Webhooks headers")
	}
	// No timestamp is signed, so a far-off clock does not matter.
	if err := signing.VerifyAt(secret, h, verifyBody, time.Minute, verifyTS.Add(24*time.Hour)); err != nil {
		t.Errorf("VerifyAt Frappe signature: %v", err)
	}
	h.Del(signing.HeaderID)
	if err := signing.VerifyAt(secret, h, verifyBody, time.Minute, verifyTS); err != nil {
		t.Errorf("VerifyAt Frappe signature without webhook-id: %v", err)
	}
	if err := signing.VerifyAt(secret, h, []byte(`{"name":"SO-2"}`), time.Minute, verifyTS); !errors.Is(err, signing.ErrNoMatch) {
		t.Errorf("VerifyAt tampered body = %v, want ErrNoMatch", err)
	}
	if err := signing.VerifyAt("another-frappe-secret", h, verifyBody, time.Minute, verifyTS); !errors.Is(err, signing.ErrNoMatch) {
		t.Errorf("VerifyAt wrong secret = %v, want ErrNoMatch", err)
	}
	h.Set(signing.HeaderFrappe, "not base64")
	if err := signing.VerifyAt(secret, h, verifyBody, time.Minute, verifyTS); !errors.Is(err, signing.ErrNoMatch) {
		t.Errorf("VerifyAt garbled header = %v, want ErrNoMatch", err)
	}
}

func TestVerifySignatureSplitAcrossHeaderLines(t *testing.T) {
	t.Parallel()
	a, b := signing.Secret("first-secret-0123456"), signing.Secret("second-secret-012345")
	h := signed(t, signing.SchemeStandard, a, b)
	entries := strings.Fields(h.Get(signing.HeaderSignature))
	h.Del(signing.HeaderSignature)
	h.Add(signing.HeaderSignature, entries[0])
	h.Add(signing.HeaderSignature, entries[1])
	if err := signing.VerifyAt(b, h, verifyBody, time.Minute, verifyTS); err != nil {
		t.Errorf("VerifyAt with the second entry on its own header line: %v", err)
	}
}

func TestVerifyUsesWallClock(t *testing.T) {
	t.Parallel()
	const secret = signing.Secret("frappe-style-secret")
	h := http.Header{}
	signing.Sign(h, signing.SchemeStandard, []signing.Secret{secret}, "dlv_now", time.Now(), verifyBody)
	if err := signing.Verify(secret, h, verifyBody, time.Minute); err != nil {
		t.Errorf("Verify of a request signed now: %v", err)
	}
	h = signed(t, signing.SchemeStandard, secret) // signed in June 2025
	if err := signing.Verify(secret, h, verifyBody, time.Minute); !errors.Is(err, signing.ErrTimestamp) {
		t.Errorf("Verify of a request signed long ago = %v, want ErrTimestamp", err)
	}
}

func FuzzSignVerify(f *testing.F) {
	f.Add("dlv_1", []byte(`{"a":1}`), int64(1_750_000_000))
	f.Add("", []byte{}, int64(0))
	f.Add("id with spaces.and.dots", []byte("\x00\xff"), int64(-1))
	f.Fuzz(func(t *testing.T, id string, body []byte, unix int64) {
		secrets := []signing.Secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "frappe-style-secret"}
		ts := time.Unix(unix, 0)
		h := http.Header{}
		signing.Sign(h, signing.SchemeBoth, secrets, id, ts, body)
		err := signing.VerifyAt(secrets[1], h, body, time.Minute, ts)
		if id == "" || strings.ContainsAny(id, "\r\n") {
			return // not a valid header value; only check it does not panic
		}
		if err != nil {
			t.Fatalf("VerifyAt of a fresh signature: %v", err)
		}
		if err := signing.VerifyAt(secrets[1], h, append(body, 'x'), time.Minute, ts); !errors.Is(err, signing.ErrNoMatch) {
			t.Fatalf("VerifyAt of a changed body = %v, want ErrNoMatch", err)
		}
	})
}
