package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"
)

// Standard Webhooks header names. HeaderID is sent on every request, signed
// or not, because receivers drop duplicate deliveries by it.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// standardVersion is the signature version tag of the symmetric
// HMAC-SHA256 scheme.
const standardVersion = "v1"

// Standard computes the Standard Webhooks v1 signature header value for one
// secret: "v1,<base64 HMAC-SHA256(key, id + "." + unixSeconds + "." + body)>".
// Only the whole seconds of ts are signed, as the header carries them.
func Standard(secret Secret, id string, ts time.Time, body []byte) string {
	return standardVersion + "," + base64.StdEncoding.EncodeToString(standardMAC(secret.Key(), id, ts.Unix(), body))
}

// standardMAC is the raw HMAC that Standard encodes and VerifyAt compares.
func standardMAC(key []byte, id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
