package secretbox_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/secretbox"
)

func newBox(t *testing.T) *secretbox.Box {
	t.Helper()
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	if !b.HasKey() {
		t.Fatal("Box made from a generated key has no key")
	}
	return b
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	a, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(a)
	if err != nil || len(raw) != 32 {
		t.Fatalf("generated key decodes to %d bytes (%v), want 32", len(raw), err)
	}
	if a == b {
		t.Fatal("GenerateKey returned the same key twice")
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := newBox(t)
	for _, plain := range []string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"frappe-style-secret",
		"x",
		"ünïcødé and \x00 bytes",
		strings.Repeat("long", 1000),
	} {
		sealed, err := b.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sealed, "v1:") {
			t.Errorf("sealed text %q does not start with v1:", sealed)
		}
		// Short texts can turn up in base64 by chance; long ones cannot.
		if len(plain) >= 8 && strings.Contains(sealed, plain) {
			t.Errorf("sealed text contains the plaintext")
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1:"))
		if err != nil {
			t.Fatalf("sealed text is not v1: + base64: %v", err)
		}
		if want := 12 + len(plain) + 16; len(raw) != want {
			t.Errorf("sealed %d bytes for a %d-byte secret, want nonce(12)+ciphertext+tag(16) = %d", len(raw), len(plain), want)
		}
		got, err := b.Open(sealed)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if got != plain {
			t.Errorf("Open = %q, want %q", got, plain)
		}
	}
}

func TestSealedByAnotherBoxWithTheSameKey(t *testing.T) {
	t.Parallel()
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	a, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := a.Seal("frappe-style-secret")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Open(sealed); err != nil || got != "frappe-style-secret" {
		t.Errorf("Open with the same key in a new Box = %q, %v", got, err)
	}
}

func TestEmptyMeansNoSecret(t *testing.T) {
	t.Parallel()
	noKey, err := secretbox.New("")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*secretbox.Box{"with key": newBox(t), "without key": noKey} {
		if s, err := b.Seal(""); s != "" || err != nil {
			t.Errorf("%s: Seal(\"\") = %q, %v; want \"\", nil", name, s, err)
		}
		if s, err := b.Open(""); s != "" || err != nil {
			t.Errorf("%s: Open(\"\") = %q, %v; want \"\", nil", name, s, err)
		}
	}
}

func TestNonceUniqueness(t *testing.T) {
	t.Parallel()
	b := newBox(t)
	seen := make(map[string]bool)
	for range 1000 {
		sealed, err := b.Seal("same secret every time")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1:"))
		if err != nil {
			t.Fatal(err)
		}
		nonce := string(raw[:12])
		if seen[nonce] {
			t.Fatal("two seals used the same nonce")
		}
		seen[nonce] = true
	}
}

func TestWrongKey(t *testing.T) {
	t.Parallel()
	sealed, err := newBox(t).Seal("frappe-style-secret")
	if err != nil {
		t.Fatal(err)
	}
	got, err := newBox(t).Open(sealed)
	if !errors.Is(err, secretbox.ErrDecrypt) {
		t.Fatalf("Open with another key = %q, %v; want ErrDecrypt", got, err)
	}
	if got != "" {
		t.Errorf("Open with another key returned %q along with its error", got)
	}
}

func TestTampered(t *testing.T) {
	t.Parallel()
	b := newBox(t)
	sealed, err := b.Seal("frappe-style-secret")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1:"))
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(r []byte) string { return "v1:" + base64.StdEncoding.EncodeToString(r) }
	// Flip one bit in the nonce, the ciphertext and the tag in turn.
	for _, i := range []int{0, 11, 12, len(raw) - 17, len(raw) - 16, len(raw) - 1} {
		r := append([]byte(nil), raw...)
		r[i] ^= 0x01
		if got, err := b.Open(reseal(r)); !errors.Is(err, secretbox.ErrDecrypt) {
			t.Errorf("Open with byte %d flipped = %q, %v; want ErrDecrypt", i, got, err)
		}
	}
	if got, err := b.Open(reseal(raw[:len(raw)-1])); !errors.Is(err, secretbox.ErrDecrypt) {
		t.Errorf("Open of a truncated tag = %q, %v; want ErrDecrypt", got, err)
	}
	if got, err := b.Open(reseal(append(append([]byte(nil), raw...), 0))); !errors.Is(err, secretbox.ErrDecrypt) {
		t.Errorf("Open with a byte appended = %q, %v; want ErrDecrypt", got, err)
	}
}

func TestMalformed(t *testing.T) {
	t.Parallel()
	b := newBox(t)
	for _, s := range []string{
		"frappe-style-secret",                         // a plaintext secret stored before encryption
		"v2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", // unknown version
		"v1:not base64!",
		"v1:",
		"v1:" + base64.StdEncoding.EncodeToString(make([]byte, 27)), // shorter than nonce + tag
	} {
		got, err := b.Open(s)
		if !errors.Is(err, secretbox.ErrMalformed) {
			t.Errorf("Open(%q) = %q, %v; want ErrMalformed", s, got, err)
		}
	}
}

func TestBadKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, why string
	}{
		{"not base64", "this-is-not-base64-at-all!", "not valid base64"},
		{"url-safe base64", strings.ReplaceAll(strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte("\xfb\xff\xfe0123456789abcdefghijklmnopq")), "+", "-"), "/", "_"), "not valid base64"},
		{"16 bytes", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")), "decodes to 16 bytes"},
		{"31 bytes", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcde")), "decodes to 31 bytes"},
		{"33 bytes", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdefg")), "decodes to 33 bytes"},
		{"hex instead of base64", strings.Repeat("0a", 32), "decodes to 48 bytes"},
		{"surrounding spaces", " " + base64.StdEncoding.EncodeToString(make([]byte, 32)) + " ", "not valid base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := secretbox.New(tc.key)
			if err == nil {
				t.Fatalf("New accepted the key (HasKey %v)", b.HasKey())
			}
			if !errors.Is(err, secretbox.ErrInvalidKey) {
				t.Errorf("New error %v does not wrap ErrInvalidKey", err)
			}
			msg := err.Error()
			for _, want := range []string{"secrets.key", "32", tc.why} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, strings.TrimSpace(tc.key)) {
				t.Errorf("error %q contains the key", msg)
			}
		})
	}
}

func TestNoKey(t *testing.T) {
	t.Parallel()
	b, err := secretbox.New("")
	if err != nil {
		t.Fatalf("New(\"\") = %v; an unset key is allowed", err)
	}
	if b == nil || b.HasKey() {
		t.Fatal("New(\"\") must return a Box without a key")
	}
	if s, err := b.Seal("frappe-style-secret"); !errors.Is(err, secretbox.ErrNoKey) || s != "" {
		t.Errorf("Seal without a key = %q, %v; want ErrNoKey", s, err)
	}
	sealed, err := newBox(t).Seal("frappe-style-secret")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := b.Open(sealed); !errors.Is(err, secretbox.ErrNoKey) || s != "" {
		t.Errorf("Open without a key = %q, %v; want ErrNoKey", s, err)
	}
	for _, want := range []string{"secrets.key is not set", "homing secrets genkey", "HOMING_SECRETS_KEY"} {
		if !strings.Contains(secretbox.ErrNoKey.Error(), want) {
			t.Errorf("ErrNoKey %q does not say %q", secretbox.ErrNoKey, want)
		}
	}
	var nilBox *secretbox.Box
	if nilBox.HasKey() {
		t.Error("nil Box has a key")
	}
	if _, err := nilBox.Seal("x"); !errors.Is(err, secretbox.ErrNoKey) {
		t.Errorf("Seal on a nil Box = %v, want ErrNoKey", err)
	}
}

func TestKeyWithTrailingNewlineIsAccepted(t *testing.T) {
	t.Parallel()
	// A key read from a file keeps its newline; base64 ignores line breaks.
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := secretbox.New(key + "\n")
	if err != nil {
		t.Fatalf("New(key + newline): %v", err)
	}
	a, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := a.Seal("frappe-style-secret")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Open(sealed); err != nil || got != "frappe-style-secret" {
		t.Errorf("Open = %q, %v", got, err)
	}
}

func BenchmarkSealOpen(b *testing.B) {
	key, err := secretbox.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s, err := box.Seal("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := box.Open(s); err != nil {
			b.Fatal(err)
		}
	}
}

// Subkey derives distinct keys per label from secrets.key, and none without
// a key.
func TestSubkey(t *testing.T) {
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, other := b.Subkey("a"), b.Subkey("a"), b.Subkey("b")
	if len(a1) != 32 || string(a1) != string(a2) || string(a1) == string(other) {
		t.Fatalf("subkeys a %x, a again %x, b %x: want 32 bytes, stable per label, distinct across labels", a1, a2, other)
	}
	empty, _ := secretbox.New("")
	if empty.Subkey("a") != nil {
		t.Fatal("a Box without a key derived a subkey")
	}
}

// TestFingerprint: two boxes of one key share a fingerprint, another key
// has another, no key has none, and the fingerprint is not the key.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	key, _ := secretbox.GenerateKey()
	a, _ := secretbox.New(key)
	b, _ := secretbox.New(key)
	other := newBox(t)
	none, _ := secretbox.New("")
	if a.Fingerprint() == "" || a.Fingerprint() != b.Fingerprint() || len(a.Fingerprint()) != 12 {
		t.Errorf("one key's fingerprints %q and %q, want the same 12 hex digits", a.Fingerprint(), b.Fingerprint())
	}
	if other.Fingerprint() == a.Fingerprint() {
		t.Errorf("two keys share the fingerprint %q", a.Fingerprint())
	}
	if none.Fingerprint() != "" {
		t.Errorf("no key has the fingerprint %q", none.Fingerprint())
	}
	raw, _ := base64.StdEncoding.DecodeString(key)
	if strings.Contains(fmt.Sprintf("%x", raw), a.Fingerprint()) {
		t.Errorf("the fingerprint %q is part of the key", a.Fingerprint())
	}
}
