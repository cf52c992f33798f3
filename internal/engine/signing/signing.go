// Package signing signs webhook requests so receivers can tell they came from
// Homing and were not altered: the Standard Webhooks v1 scheme
// (webhook-id, webhook-timestamp, webhook-signature) and Frappe's
// X-Frappe-Webhook-Signature, so existing Frappe receivers keep working.
package signing

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Scheme names, stored per webhook. They decide which signature headers an
// attempt carries; webhook-id is sent whatever the scheme.
const (
	// SchemeBoth sends the Standard Webhooks and the Frappe signatures, so
	// receivers written for either verify without changes.
	SchemeBoth = "both"
	// SchemeStandard sends only the Standard Webhooks headers.
	SchemeStandard = "standard"
	// SchemeFrappe sends only X-Frappe-Webhook-Signature.
	SchemeFrappe = "frappe"
	// SchemeNone sends no signature, only webhook-id.
	SchemeNone = "none"
)

// ValidScheme reports whether s is one of the scheme names, so a typo in a
// webhook definition is refused when it is saved rather than silently
// changing what receivers get.
func ValidScheme(s string) error {
	switch s {
	case SchemeBoth, SchemeStandard, SchemeFrappe, SchemeNone:
		return nil
	}
	return fmt.Errorf("%w: %q is not one of %s, %s, %s, %s",
		ErrInvalidScheme, s, SchemeBoth, SchemeStandard, SchemeFrappe, SchemeNone)
}

// ErrInvalidScheme is wrapped by ValidScheme's errors.
var ErrInvalidScheme = errors.New("unknown signature scheme")

// ErrInvalidSecret is wrapped by every error ParseSecret returns. Those
// errors say what is wrong with the secret but never contain it, so they are
// safe to log and to show in an API response.
var ErrInvalidSecret = errors.New("invalid secret")

// StandardPrefix marks a Standard Webhooks secret: what follows it is the
// base64 (standard encoding) of the key.
const StandardPrefix = "whsec_"

// MinKeyBytes is the shortest key ParseSecret accepts. Below 128 bits an HMAC
// key can be guessed; Svix and Standard Webhooks generate 24 or 32 bytes.
const MinKeyBytes = 16

// secretBytes is how many random bytes GenerateSecret draws: 256 bits, the
// output size of SHA-256 (Svix draws 24).
const secretBytes = 32

// Secret is one signing secret as configured. A Standard Webhooks secret is
// "whsec_<base64 key>" and its key is the decoded bytes; any other string (a
// Frappe user's own secret) is used as its raw bytes for both schemes.
//
// A Secret that did not come from ParseSecret or GenerateSecret may be
// malformed; Key then falls back to the raw bytes rather than to an empty
// key, so signatures fail to verify instead of being forgeable.
type Secret string

// Key returns the key bytes for the Standard Webhooks HMAC: the decoded
// base64 of a whsec_ secret, else the secret's raw bytes.
func (s Secret) Key() []byte {
	if key, ok := s.standardKey(); ok {
		return key
	}
	return []byte(s)
}

// standardKey decodes a whsec_ secret. ok is false when s has no prefix or
// its base64 is invalid.
func (s Secret) standardKey() (key []byte, ok bool) {
	rest, found := strings.CutPrefix(string(s), StandardPrefix)
	if !found {
		return nil, false
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, false
	}
	return key, true
}

// GenerateSecret returns a new Standard Webhooks secret: "whsec_" and the
// base64 (standard, padded) of 32 bytes from crypto/rand.
func GenerateSecret() (Secret, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return Secret(StandardPrefix + base64.StdEncoding.EncodeToString(b)), nil
}

// ParseSecret validates a secret given by an operator. It refuses an empty
// secret, one containing whitespace or control characters (almost always a
// copy-paste accident, and invisible in a config file), one that is not
// UTF-8, a whsec_ secret whose base64 is invalid or whose key is shorter
// than MinKeyBytes. A raw (non-whsec_) secret is used as its bytes. The errors
// wrap ErrInvalidSecret and never contain the secret.
func ParseSecret(s string) (Secret, error) {
	if s == "" {
		return "", fmt.Errorf("%w: it is empty", ErrInvalidSecret)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: it is not valid UTF-8", ErrInvalidSecret)
	}
	for i, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "", fmt.Errorf("%w: it contains whitespace or a control character at byte %d of %d; remove it", ErrInvalidSecret, i, len(s))
		}
	}
	secret := Secret(s)
	if rest, ok := strings.CutPrefix(s, StandardPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			var corrupt base64.CorruptInputError
			if errors.As(err, &corrupt) {
				return "", fmt.Errorf("%w: what follows %q must be standard padded base64, and byte %d of it is not", ErrInvalidSecret, StandardPrefix, int64(corrupt))
			}
			return "", fmt.Errorf("%w: what follows %q must be standard padded base64", ErrInvalidSecret, StandardPrefix)
		}
		if len(key) < MinKeyBytes {
			return "", fmt.Errorf("%w: its key is %d bytes, at least %d are needed; generate one with GenerateSecret", ErrInvalidSecret, len(key), MinKeyBytes)
		}
		return secret, nil
	}
	// A raw secret is one a Frappe user brings: their receivers already hold
	// it, so it is accepted as it is, however short.
	return secret, nil
}

// Sign sets the signature headers of one attempt on h and returns the names
// it set. Every attempt is signed afresh, with its own ts, so a retry hours
// later still passes the receiver's timestamp tolerance.
//
//   - webhook-id is always set to id, even with SchemeNone or no secrets,
//     because receivers drop duplicate deliveries by it.
//   - With SchemeStandard or SchemeBoth: webhook-timestamp (Unix seconds of
//     ts) and webhook-signature with one "v1,..." entry per secret,
//     space-separated, current first, so during a rotation a receiver holding
//     either the old or the new secret verifies.
//   - With SchemeFrappe or SchemeBoth: X-Frappe-Webhook-Signature, computed
//     with secrets[0] only (the current one), since Frappe carries a single
//     signature.
//
// Empty secrets are skipped; with no secret left only webhook-id is set. Any
// signature headers already on h (say, from a stored copy of an earlier
// attempt) are removed first, so a stale signature is never sent. A scheme
// that ValidScheme refuses signs like SchemeBoth: a bad stored value must not
// turn into unsigned requests.
func Sign(h http.Header, scheme string, secrets []Secret, id string, ts time.Time, body []byte) []string {
	h.Del(HeaderTimestamp)
	h.Del(HeaderSignature)
	h.Del(HeaderFrappe)
	h.Set(HeaderID, id)
	set := []string{HeaderID}

	live := make([]Secret, 0, len(secrets))
	for _, s := range secrets {
		if s != "" {
			live = append(live, s)
		}
	}
	if len(live) == 0 || scheme == SchemeNone {
		return set
	}
	if scheme != SchemeFrappe {
		sigs := make([]string, len(live))
		for i, s := range live {
			sigs[i] = Standard(s, id, ts, body)
		}
		h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(HeaderSignature, strings.Join(sigs, " "))
		set = append(set, HeaderTimestamp, HeaderSignature)
	}
	if scheme != SchemeStandard {
		h.Set(HeaderFrappe, Frappe(live[0], body))
		set = append(set, HeaderFrappe)
	}
	return set
}
