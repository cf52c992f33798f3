// Package secretbox encrypts webhook secrets at rest with AES-256-GCM, so a
// copy of the database (a backup, a replica, a support dump) does not hand
// out the keys that sign Homing's requests.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrNoKey means a secret had to be sealed or opened but secrets.key is not
// configured. Homing runs without a key as long as no webhook has a secret.
var ErrNoKey = errors.New(`secrets.key is not set: generate one with "homing secrets genkey" and set HOMING_SECRETS_KEY`)

// ErrDecrypt means a sealed secret failed authentication: it was sealed with
// another key, or the stored text was altered. GCM cannot tell the two apart.
var ErrDecrypt = errors.New("cannot decrypt secret: wrong secrets.key?")

// ErrInvalidKey is wrapped by New's errors for a key that is set but unusable.
var ErrInvalidKey = errors.New("invalid secrets.key")

// ErrMalformed is wrapped by Open's errors for text that is not a sealed
// secret at all, as opposed to one sealed with another key.
var ErrMalformed = errors.New("malformed sealed secret")

// keyBytes is the AES-256 key size.
const keyBytes = 32

// prefix versions the sealed format, so the algorithm or key can change
// later without guessing what old rows hold.
const prefix = "v1:"

// Box seals and opens secrets with one key. It is safe for concurrent use.
// A Box made from an empty key holds no key: Seal and Open of a non-empty
// secret return ErrNoKey.
type Box struct {
	aead cipher.AEAD // nil without a key
	key  []byte      // nil without a key; only Subkey reads it
}

// GenerateKey returns a new secrets.key: the base64 (standard) of 32 bytes
// from crypto/rand.
func GenerateKey() (string, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secrets.key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// New returns a Box for keyB64, the configured secrets.key. An empty key
// gives a Box without a key rather than an error, so deployments that sign
// nothing need no key. A key that is set must be the base64 (standard) of
// exactly 32 bytes; the error says so without repeating the key.
func New(keyB64 string) (*Box, error) {
	if keyB64 == "" {
		return &Box{}, nil
	}
	key, err := base64.StdEncoding.DecodeString(keyB64)
	if err != nil {
		return nil, fmt.Errorf("%w: it must be the standard base64 of %d random bytes and is not valid base64; generate one with \"homing secrets genkey\"", ErrInvalidKey, keyBytes)
	}
	if len(key) != keyBytes {
		return nil, fmt.Errorf("%w: it must be the standard base64 of %d random bytes and decodes to %d bytes; generate one with \"homing secrets genkey\"", ErrInvalidKey, keyBytes, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	// The random-nonce GCM draws a fresh 12-byte nonce per Seal and puts it
	// in front of the ciphertext: nonce || ciphertext || tag.
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return &Box{aead: aead, key: key}, nil
}

// Subkey derives a key for another use of secrets.key (HMAC-SHA256 of the
// key over label), so that one configured secret serves several purposes
// without any two sharing a key: a portal link's signature cannot open a
// sealed secret, nor the other way round. It is nil without a key.
func (b *Box) Subkey(label string) []byte {
	if !b.HasKey() {
		return nil
	}
	m := hmac.New(sha256.New, b.key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Fingerprint names the key without revealing it: 12 hex digits of a
// Subkey, "" without a key. Processes compare fingerprints to tell whether
// they hold the same secrets.key (homing stats against the running
// workers'); nothing can be opened or signed with one.
func (b *Box) Fingerprint() string {
	k := b.Subkey(fingerprintLabel)
	if k == nil {
		return ""
	}
	return hex.EncodeToString(k[:6])
}

// fingerprintLabel is Fingerprint's Subkey label.
const fingerprintLabel = "homing secrets.key fingerprint"

// HasKey reports whether the Box can seal and open secrets, so callers can
// refuse a webhook secret early with a clear message.
func (b *Box) HasKey() bool {
	return b != nil && b.aead != nil
}

// Seal encrypts plaintext as "v1:" + base64(nonce || ciphertext) with a
// random 12-byte nonce, so two seals of the same secret differ. An empty
// plaintext means no secret and seals to "", with or without a key.
func (b *Box) Seal(plaintext string) (string, error) {
	if plaintext == "" {
		return "", nil
	}
	if !b.HasKey() {
		return "", ErrNoKey
	}
	sealed := b.aead.Seal(nil, nil, []byte(plaintext), nil)
	return prefix + base64.StdEncoding.EncodeToString(sealed), nil
}

// Open decrypts what Seal returned. "" opens to "" (no secret). A secret
// sealed with another key, or altered, returns ErrDecrypt; text that is not
// a sealed secret returns an error wrapping ErrMalformed. Errors carry no
// "open secret" prefix: callers add the webhook they were opening.
func (b *Box) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	if !b.HasKey() {
		return "", ErrNoKey
	}
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", fmt.Errorf("%w: it does not start with %q", ErrMalformed, prefix)
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(raw) < b.aead.Overhead() {
		return "", fmt.Errorf("%w: %d bytes is shorter than a nonce and tag", ErrMalformed, len(raw))
	}
	plain, err := b.aead.Open(nil, nil, raw, nil)
	if err != nil {
		return "", ErrDecrypt
	}
	return string(plain), nil
}
