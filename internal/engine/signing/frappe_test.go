package signing_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/homingdev/homing/internal/engine/signing"
)

// hmacB64 is the HMAC a Frappe receiver computes:
// base64.b64encode(hmac.new(secret.encode(), body, sha256).digest()).
func hmacB64(key, msg []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestFrappe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secret signing.Secret
		body   string
		// python3: base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest())
		python string
	}{
		{"raw secret", "frappe-style-secret", `{"name": "SO-1"}`, "V60Soo+M2drBRN36YoLBj1grxOvI98kGQ9mJsImyjzs="},
		// The whole whsec_ string is the key, not the decoded bytes.
		{"whsec secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `{"test": 2432232314}`, "gOyKic480iEzoQZsrstNBP6nRnZXyFFNcX7ELDilyUw="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := signing.Frappe(tc.secret, []byte(tc.body))
			if got != tc.python {
				t.Errorf("Frappe = %q, want %q (computed by Python's hmac)", got, tc.python)
			}
			if want := hmacB64([]byte(tc.secret), []byte(tc.body)); got != want {
				t.Errorf("Frappe = %q, want %q", got, want)
			}
		})
	}
	whsec := signing.Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if signing.Frappe(whsec, nil) == hmacB64(whsec.Key(), nil) {
		t.Error("Frappe keyed with the decoded whsec_ key; Frappe keys with the string as configured")
	}
}

func TestFrappeSignsExactBytes(t *testing.T) {
	t.Parallel()
	s := signing.Secret("frappe-style-secret")
	a := signing.Frappe(s, []byte(`{"a":1}`))
	b := signing.Frappe(s, []byte(`{"a": 1}`))
	if a == b {
		t.Error("two bodies differing in whitespace got the same signature")
	}
}
