package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/models"
)

// LiveSecrets opens w's current secret and those still inside their
// rotation grace period at now, current first; none when w has no secret.
func LiveSecrets(box *secretbox.Box, w *models.Webhook, now time.Time) ([]signing.Secret, error) {
	if w.Secret == "" {
		return nil, nil
	}
	plain, err := box.Open(w.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook %q: open secret: %w", w.Name, err)
	}
	out := []signing.Secret{signing.Secret(plain)}
	for _, p := range w.PreviousSecrets {
		if !p.ExpiresAt.After(now) {
			continue
		}
		old, err := box.Open(p.Sealed)
		if err != nil {
			return nil, fmt.Errorf("webhook %q: open previous secret: %w", w.Name, err)
		}
		out = append(out, signing.Secret(old))
	}
	return out, nil
}

// HeaderError is a sealed header of a webhook that could not be opened (the
// process's secrets.key is not the one that sealed it).
type HeaderError struct{ err error }

func (e *HeaderError) Error() string { return e.err.Error() }
func (e *HeaderError) Unwrap() error { return e.err }

// Sign completes h as every request to w goes out (an attempt's, a test
// send's): w's sealed headers opened into it, then signed with secrets
// (LiveSecrets) under w's scheme as message id at now over body. It returns
// the names of the headers a log must mask (the sealed ones and the
// signatures). A sealed header that cannot be opened is a *HeaderError.
func Sign(box *secretbox.Box, w *models.Webhook, h http.Header, secrets []signing.Secret, id string, now time.Time, body []byte) ([]string, error) {
	var secret []string
	for k, v := range w.Headers {
		if !FromWebhook(k, v) {
			continue
		}
		plain, err := OpenHeader(box, v)
		if err != nil {
			return nil, &HeaderError{fmt.Errorf("webhook %q: header %s: %w", w.Name, k, err)}
		}
		h.Set(k, plain)
		secret = append(secret, k)
	}
	scheme := w.SignatureScheme
	if len(secrets) == 0 {
		scheme = signing.SchemeNone
	}
	return append(secret, signing.Sign(h, scheme, secrets, id, now, body)...), nil
}

// ErrNoSecret is returned by Secret for a webhook that signs nothing.
var ErrNoSecret = errors.New("webhook has no signing secret")

// Secret opens tenant's webhook name's current signing secret, for the
// console's and the portal's reveal (a POST with its CSRF token, after a
// confirmation): its owner needs it to verify what the webhook sends. It
// returns ErrNoSecret when the webhook has none, and is logged, without the
// secret, by its caller.
func (s *Service) Secret(ctx context.Context, tenant, name string) (models.Webhook, signing.Secret, error) {
	w, err := s.Get(ctx, tenant, name)
	if err != nil {
		return w, "", err
	}
	if w.Secret == "" {
		return w, "", fmt.Errorf("%w: %q (Rotate secret makes one)", ErrNoSecret, name)
	}
	plain, err := s.box.Open(w.Secret)
	if err != nil {
		return w, "", fmt.Errorf("webhook %q: open secret: %w", name, err)
	}
	return w, signing.Secret(plain), nil
}
