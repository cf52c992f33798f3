package signing_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/homingdev/homing/internal/engine/signing"
)

// The test vector of the Standard Webhooks reference libraries
// (libraries/go/webhook_test.go, TestSign, and the same in every language).
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specUnix      = 1614265330
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestStandardSpecVector(t *testing.T) {
	t.Parallel()
	secret, err := signing.ParseSecret(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(specUnix, 0)
	if got := signing.Standard(secret, specID, ts, []byte(specPayload)); got != specSignature {
		t.Errorf("Standard = %q, want the spec's %q", got, specSignature)
	}
	h := http.Header{}
	signing.Sign(h, signing.SchemeStandard, []signing.Secret{secret}, specID, ts, []byte(specPayload))
	if got := h.Get(signing.HeaderSignature); got != specSignature {
		t.Errorf("Sign set %s = %q, want %q", signing.HeaderSignature, got, specSignature)
	}
	if err := signing.VerifyAt(secret, h, []byte(specPayload), 0, ts); err != nil {
		t.Errorf("VerifyAt the spec vector: %v", err)
	}
}

func TestRawSecretStandardSignature(t *testing.T) {
	t.Parallel()
	// python3: "v1," + base64.b64encode(hmac.new(b"frappe-style-secret",
	//   b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330." + payload, hashlib.sha256).digest())
	const want = "v1,7HApRRraJLEwjjOY+fosR5AyF4dajEtICkOF+N/Bz0I="
	got := signing.Standard("frappe-style-secret", specID, time.Unix(specUnix, 0), []byte(specPayload))
	if got != want {
		t.Errorf("Standard with a raw secret = %q, want %q (HMAC keyed with the raw bytes)", got, want)
	}
}

// reference returns the Standard Webhooks reference verifier for s.
func reference(t *testing.T, s signing.Secret) *standardwebhooks.Webhook {
	t.Helper()
	var (
		wh  *standardwebhooks.Webhook
		err error
	)
	if strings.HasPrefix(string(s), "whsec_") {
		wh, err = standardwebhooks.NewWebhook(string(s))
	} else {
		wh, err = standardwebhooks.NewWebhookRaw([]byte(s))
	}
	if err != nil {
		t.Fatalf("reference library refuses the secret: %v", err)
	}
	return wh
}

func TestSignPassesReferenceVerifier(t *testing.T) {
	t.Parallel()
	generated, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"name":"SO-1","items":[{"qty":2}]}` + "\n")
	for _, secret := range []signing.Secret{generated, specSecret, "frappe-style-secret"} {
		h := http.Header{}
		signing.Sign(h, signing.SchemeBoth, []signing.Secret{secret}, "dlv_01J9", time.Unix(1_750_000_000, 0), body)
		wh := reference(t, secret)
		if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
			t.Errorf("reference library rejects our signature: %v", err)
		}
		if err := wh.VerifyIgnoringTimestamp(append(body, ' '), h); err == nil {
			t.Error("reference library accepts our signature over another body; the check could not fail")
		}
		// The reference Verify reads the wall clock, so sign at the wall clock.
		h = http.Header{}
		signing.Sign(h, signing.SchemeStandard, []signing.Secret{secret}, "dlv_01J9", time.Now(), body)
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("reference Verify rejects a signature made now: %v", err)
		}
	}
}

func TestVerifyAcceptsReferenceSignature(t *testing.T) {
	t.Parallel()
	body := []byte(specPayload)
	ts := time.Unix(1_750_000_000, 0)
	for _, secret := range []signing.Secret{specSecret, "frappe-style-secret"} {
		sig, err := reference(t, secret).Sign("msg_ref", ts, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(standardwebhooks.HeaderWebhookID, "msg_ref")
		h.Set(standardwebhooks.HeaderWebhookTimestamp, "1750000000")
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
		if err := signing.VerifyAt(secret, h, body, time.Minute, ts.Add(30*time.Second)); err != nil {
			t.Errorf("VerifyAt rejects the reference library's signature: %v", err)
		}
	}
}

// TestReceiverVerifiesOverHTTP signs a real request and verifies what the
// receiver got off the wire, with both Homing's verifier and the reference.
func TestReceiverVerifiesOverHTTP(t *testing.T) {
	t.Parallel()
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	type received struct {
		ours, theirs error
		body         []byte
	}
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		got <- received{
			ours:   signing.Verify(secret, r.Header, b, 0),
			theirs: reference(t, secret).Verify(b, r.Header),
			body:   b,
		}
	}))
	t.Cleanup(srv.Close)

	body := []byte(`{"doctype":"Sales Order","name":"SO-1"}`)
	req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	signing.Sign(req.Header, signing.SchemeBoth, []signing.Secret{secret}, "dlv_wire", time.Now(), body)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := <-got
	if !bytes.Equal(r.body, body) {
		t.Fatalf("receiver got body %q, want %q", r.body, body)
	}
	if r.ours != nil {
		t.Errorf("signing.Verify at the receiver: %v", r.ours)
	}
	if r.theirs != nil {
		t.Errorf("reference Verify at the receiver: %v", r.theirs)
	}
}

func BenchmarkSign(b *testing.B) {
	secrets := []signing.Secret{specSecret, "frappe-style-secret"}
	body := bytes.Repeat([]byte("x"), 4<<10)
	ts := time.Unix(specUnix, 0)
	b.ReportAllocs()
	for b.Loop() {
		signing.Sign(http.Header{}, signing.SchemeBoth, secrets, specID, ts, body)
	}
}
