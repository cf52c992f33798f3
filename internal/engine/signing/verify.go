package signing

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far webhook-timestamp may be from the receiver's
// clock when Verify is given no tolerance, as in the Standard Webhooks
// reference libraries.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify and VerifyAt; they are wrapped with details, so compare
// with errors.Is.
var (
	// ErrMissingHeaders means the request carries neither a complete
	// Standard Webhooks header set nor X-Frappe-Webhook-Signature.
	ErrMissingHeaders = errors.New("missing signature headers")
	// ErrTimestamp means webhook-timestamp is unparsable or further from
	// now than the tolerance: a replay, or a badly wrong clock.
	ErrTimestamp = errors.New("webhook-timestamp rejected")
	// ErrNoMatch means no signature on the request was made with the secret
	// over this body (and, for Standard Webhooks, this id and timestamp).
	ErrNoMatch = errors.New("no matching signature")
)

// Verify checks a request the way a receiver does, for Go receivers that
// import Homing's package; it is VerifyAt with the receiver's wall clock.
// A tolerance of zero or less means DefaultTolerance.
func Verify(secret Secret, h http.Header, body []byte, tolerance time.Duration) error {
	return VerifyAt(secret, h, body, tolerance, time.Now())
}

// VerifyAt checks a request as Verify does, taking the receiver's clock as
// now so tests and callers with their own clock can pin it.
//
// With webhook-signature present it needs webhook-id and webhook-timestamp,
// rejects a timestamp further than tolerance from now in either direction
// (ErrTimestamp), and accepts any of the space-separated v1 signatures
// (entries of other versions are skipped). Without webhook-signature it
// verifies X-Frappe-Webhook-Signature instead; that signature covers only
// the body, so it cannot be checked for age and a captured request can be
// replayed. Receivers that can should rely on the Standard Webhooks headers.
// Signatures are compared in constant time.
func VerifyAt(secret Secret, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	if secret == "" {
		return fmt.Errorf("verify webhook: %w: the verifier's secret is empty", ErrInvalidSecret)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sigs := signatureFields(h.Values(HeaderSignature))
	if len(sigs) == 0 {
		if f := strings.TrimSpace(h.Get(HeaderFrappe)); f != "" {
			return verifyFrappe(secret, f, body)
		}
		return fmt.Errorf("verify webhook: %w: need %s, %s and %s, or %s", ErrMissingHeaders, HeaderID, HeaderTimestamp, HeaderSignature, HeaderFrappe)
	}

	id, tsText := h.Get(HeaderID), h.Get(HeaderTimestamp)
	if id == "" || tsText == "" {
		return fmt.Errorf("verify webhook: %w: %s is set but %s or %s is not", ErrMissingHeaders, HeaderSignature, HeaderID, HeaderTimestamp)
	}
	unix, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("verify webhook: %w: %s %q is not Unix seconds", ErrTimestamp, HeaderTimestamp, tsText)
	}
	ts := time.Unix(unix, 0)
	if age := now.Sub(ts); age > tolerance {
		return fmt.Errorf("verify webhook: %w: %s is %s old, more than the tolerance of %s", ErrTimestamp, HeaderTimestamp, age.Truncate(time.Second), tolerance)
	}
	if ahead := ts.Sub(now); ahead > tolerance {
		return fmt.Errorf("verify webhook: %w: %s is %s in the future, more than the tolerance of %s", ErrTimestamp, HeaderTimestamp, ahead.Truncate(time.Second), tolerance)
	}

	want := standardMAC(secret.Key(), id, unix, body)
	for _, sig := range sigs {
		version, encoded, ok := strings.Cut(sig, ",")
		if !ok || version != standardVersion {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("verify webhook: %w: none of the %d %s entries was made with this secret over this id, timestamp and body", ErrNoMatch, len(sigs), HeaderSignature)
}

// signatureFields splits webhook-signature values into their entries. A
// proxy may have split one header into several lines, so all values count.
func signatureFields(values []string) []string {
	var out []string
	for _, v := range values {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// verifyFrappe checks an X-Frappe-Webhook-Signature value.
func verifyFrappe(secret Secret, header string, body []byte) error {
	got, err := base64.StdEncoding.DecodeString(header)
	if err != nil || !hmac.Equal(got, frappeMAC(secret, body)) {
		return fmt.Errorf("verify webhook: %w: %s was not made with this secret over this body", ErrNoMatch, HeaderFrappe)
	}
	return nil
}
