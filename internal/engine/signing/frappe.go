package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// HeaderFrappe is the header Frappe Framework's webhooks sign with, so
// receivers written for Frappe verify Homing's requests unchanged.
const HeaderFrappe = "X-Frappe-Webhook-Signature"

// Frappe computes X-Frappe-Webhook-Signature: the base64 (standard) of
// HMAC-SHA256 over the exact body bytes, keyed with the secret string exactly
// as configured. The whole string is the key, including any whsec_ prefix,
// because Frappe keys with webhook_secret.encode() and its receivers do too.
func Frappe(secret Secret, body []byte) string {
	return base64.StdEncoding.EncodeToString(frappeMAC(secret, body))
}

// frappeMAC is the raw HMAC that Frappe encodes and VerifyAt compares.
func frappeMAC(secret Secret, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}
