package signing_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
)

func TestValidScheme(t *testing.T) {
	t.Parallel()
	for _, s := range []string{signing.SchemeBoth, signing.SchemeStandard, signing.SchemeFrappe, signing.SchemeNone} {
		if err := signing.ValidScheme(s); err != nil {
			t.Errorf("ValidScheme(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", "Both", "hmac", "standard "} {
		err := signing.ValidScheme(s)
		if !errors.Is(err, signing.ErrInvalidScheme) {
			t.Errorf("ValidScheme(%q) = %v, want ErrInvalidScheme", s, err)
			continue
		}
		for _, name := range []string{"both", "standard", "frappe", "none"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("ValidScheme(%q) error %q does not name the allowed value %q", s, err, name)
			}
		}
	}
}

func TestGenerateSecret(t *testing.T) {
	t.Parallel()
	seen := make(map[signing.Secret]bool)
	for range 1000 {
		s, err := signing.GenerateSecret()
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(string(s), "whsec_")
		if !ok {
			t.Fatalf("generated secret has no whsec_ prefix (length %d)", len(s))
		}
		key, err := base64.StdEncoding.Strict().DecodeString(rest)
		if err != nil {
			t.Fatalf("generated key is not standard padded base64: %v", err)
		}
		if len(key) != 32 {
			t.Fatalf("generated key is %d bytes, want 32", len(key))
		}
		if !slices.Equal(s.Key(), key) {
			t.Fatal("Key() is not the decoded base64 of a generated secret")
		}
		if _, err := signing.ParseSecret(string(s)); err != nil {
			t.Fatalf("ParseSecret refuses a generated secret: %v", err)
		}
		if seen[s] {
			t.Fatal("GenerateSecret returned the same secret twice")
		}
		seen[s] = true
	}
}

func TestParseSecretAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		key      []byte
	}{
		{"spec vector", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", mustDecode(t, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")},
		{"raw frappe secret", "frappe-style-secret", []byte("frappe-style-secret")},
		{"raw with symbols", "p@ss:wörd/+=16bytes", []byte("p@ss:wörd/+=16bytes")},
		{"16-byte whsec key", "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")), []byte("0123456789abcdef")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := signing.ParseSecret(tc.in)
			if err != nil {
				t.Fatalf("ParseSecret: %v", err)
			}
			if string(s) != tc.in {
				t.Errorf("ParseSecret changed the secret")
			}
			if !slices.Equal(s.Key(), tc.key) {
				t.Errorf("Key() = %x, want %x", s.Key(), tc.key)
			}
		})
	}
}

func TestParseSecretRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, why string
	}{
		{"empty", "", "empty"},
		{"trailing newline", "frappe-style-secret-value\n", "whitespace"},
		{"leading space", " frappe-style-secret-value", "whitespace"},
		{"inner tab", "frappe-style\tsecret-value", "whitespace"},
		{"control char", "frappe-style\x00secret-value", "control"},
		{"non-breaking space", "frappe-style\u00a0secret-value", "whitespace"},
		{"invalid utf-8", "frappe-style-\xffsecret-value", "UTF-8"},
		{"whsec bad base64", "whsec_MfKQ9r8GKYqrTwjU!D8ILPZIo2LaLaSw", "base64"},
		{"whsec url-safe base64", "whsec_MfKQ9r8GKYqrTwjU-D8ILPZIo2LaLaSw", "base64"},
		{"whsec missing padding", "whsec_" + strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("0123456789abcdefg")), "="), "base64"},
		{"whsec doubled prefix", "whsec_whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64"},
		{"whsec empty key", "whsec_", "bytes"},
		{"whsec short key", "whsec_" + base64.StdEncoding.EncodeToString([]byte("fifteen-bytes!!")), "at least 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := signing.ParseSecret(tc.in)
			if !errors.Is(err, signing.ErrInvalidSecret) {
				t.Fatalf("ParseSecret = (%d bytes, %v), want ErrInvalidSecret", len(s), err)
			}
			if s != "" {
				t.Errorf("ParseSecret returned a secret along with its error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.why) {
				t.Errorf("error %q does not say %q", msg, tc.why)
			}
			if tc.in == "" {
				return
			}
			// Neither the secret nor its key part may appear in the message.
			for _, leak := range []string{strings.TrimSpace(tc.in), strings.TrimPrefix(tc.in, "whsec_")} {
				if len(leak) >= 4 && strings.Contains(msg, leak) {
					t.Errorf("error %q contains the secret", msg)
				}
			}
			for _, part := range []string{"frappe-style", "secret-value", "MfKQ9r8G", "shortsecret"} {
				if strings.Contains(tc.in, part) && strings.Contains(msg, part) {
					t.Errorf("error %q contains part %q of the secret", msg, part)
				}
			}
		})
	}
}

func TestKeyOfMalformedSecretFallsBackToRawBytes(t *testing.T) {
	t.Parallel()
	s := signing.Secret("whsec_not base64!")
	if got := s.Key(); string(got) != string(s) {
		t.Errorf("Key() of an unparsable whsec_ secret = %q, want its raw bytes", got)
	}
}

func TestSignHeadersPerScheme(t *testing.T) {
	t.Parallel()
	cur, old := signing.Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), signing.Secret("frappe-style-secret")
	ts := time.Unix(1614265330, 999_000_000) // the fraction must not reach the header
	body := []byte(`{"test": 2432232314}`)
	const id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	standard := signing.Standard(cur, id, ts, body) + " " + signing.Standard(old, id, ts, body)
	frappe := signing.Frappe(cur, body)

	for _, tc := range []struct {
		name    string
		scheme  string
		secrets []signing.Secret
		want    map[string]string // header -> value; absent headers must be absent
	}{
		{"both", signing.SchemeBoth, []signing.Secret{cur, old}, map[string]string{
			signing.HeaderID: id, signing.HeaderTimestamp: "1614265330", signing.HeaderSignature: standard, signing.HeaderFrappe: frappe}},
		{"standard", signing.SchemeStandard, []signing.Secret{cur, old}, map[string]string{
			signing.HeaderID: id, signing.HeaderTimestamp: "1614265330", signing.HeaderSignature: standard}},
		{"frappe uses the current secret only", signing.SchemeFrappe, []signing.Secret{cur, old}, map[string]string{
			signing.HeaderID: id, signing.HeaderFrappe: frappe}},
		{"none", signing.SchemeNone, []signing.Secret{cur, old}, map[string]string{signing.HeaderID: id}},
		{"both without secrets", signing.SchemeBoth, nil, map[string]string{signing.HeaderID: id}},
		{"only empty secrets", signing.SchemeBoth, []signing.Secret{""}, map[string]string{signing.HeaderID: id}},
		{"empty secrets skipped", signing.SchemeBoth, []signing.Secret{"", cur, "", old}, map[string]string{
			signing.HeaderID: id, signing.HeaderTimestamp: "1614265330", signing.HeaderSignature: standard, signing.HeaderFrappe: frappe}},
		{"unknown scheme signs like both", "Standard", []signing.Secret{cur, old}, map[string]string{
			signing.HeaderID: id, signing.HeaderTimestamp: "1614265330", signing.HeaderSignature: standard, signing.HeaderFrappe: frappe}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			// Headers of an earlier attempt, as a stored copy would carry them.
			h.Set(signing.HeaderSignature, "v1,c3RhbGU=")
			h.Set(signing.HeaderTimestamp, "1")
			h.Set(signing.HeaderFrappe, "c3RhbGU=")
			h.Set("Content-Type", "application/json")

			names := signing.Sign(h, tc.scheme, tc.secrets, id, ts, body)

			for _, name := range []string{signing.HeaderID, signing.HeaderTimestamp, signing.HeaderSignature, signing.HeaderFrappe} {
				want, ok := tc.want[name]
				if got := h.Values(name); !ok && len(got) != 0 {
					t.Errorf("%s = %q, want absent", name, got)
				} else if ok && (len(got) != 1 || got[0] != want) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
				if ok != slices.Contains(names, name) {
					t.Errorf("Sign returned %q: presence of %s disagrees with the headers", names, name)
				}
			}
			if len(names) != len(tc.want) {
				t.Errorf("Sign returned %q, want the %d names set", names, len(tc.want))
			}
			if h.Get("Content-Type") != "application/json" {
				t.Error("Sign touched an unrelated header")
			}
		})
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestShortRawSecretIsAcceptedAsFrappeUsersHaveThem(t *testing.T) {
	t.Parallel()
	s, err := signing.ParseSecret("abc123")
	if err != nil || string(s.Key()) != "abc123" {
		t.Fatalf("ParseSecret(raw) = %q, %v", s, err)
	}
}
