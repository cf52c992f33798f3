package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/condition"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/models"
)

// sealedPrefix marks a header value stored sealed with secrets.key. Such a
// value is never copied into a delivery row: each attempt opens it from the
// webhook as it is then, so a changed credential applies to pending
// retries, and no row or view holds it in the clear.
const sealedPrefix = "homing-sealed:"

// SealedHeader reports whether a stored header value is sealed, and the
// sealed text to open with secretbox.
func SealedHeader(stored string) (string, bool) {
	return strings.CutPrefix(stored, sealedPrefix)
}

// FromWebhook reports whether a header is taken from the webhook at each
// attempt rather than frozen into the delivery: the sealed ones, and the
// credential headers of webhooks stored before they were sealed.
func FromWebhook(name, stored string) bool {
	_, sealed := SealedHeader(stored)
	return sealed || send.SecretByDefault(name)
}

// OpenHeader returns a stored header value in the clear.
func OpenHeader(box *secretbox.Box, stored string) (string, error) {
	sealed, ok := SealedHeader(stored)
	if !ok {
		return stored, nil
	}
	plain, err := box.Open(sealed)
	if err != nil {
		return "", fmt.Errorf("open secret header: %w", err)
	}
	return plain, nil
}

// MaskedHeaders is headers as every view shows them: secret values as
// send.Masked.
func MaskedHeaders(headers map[string]string) map[string]string {
	out := make(map[string]string, len(headers))
	for k, v := range headers {
		if _, sealed := SealedHeader(v); sealed || send.SecretByDefault(k) {
			v = send.Masked
		}
		out[k] = v
	}
	return out
}

// applyHeaders sets w's headers from in: Headers replaces them all (the
// credential headers among them sealed), SecretHeaders then sets each of
// its headers sealed. Names must be unique without regard to case.
func (s *Service) applyHeaders(w *models.Webhook, in Input) error {
	if in.Headers == nil && in.SecretHeaders == nil {
		return nil
	}
	headers := models.StringMap{}
	if in.Headers == nil {
		for k, v := range w.Headers {
			headers[k] = v
		}
	}
	seen := map[string]string{}
	for k := range headers {
		seen[strings.ToLower(k)] = k
	}
	add := func(line string, secret bool, field string) error {
		parse := send.ParseHeader
		if w.Compat == models.CompatFrappe {
			parse = send.ParseFrappeHeader
		}
		name, value, err := parse(line)
		if err != nil {
			return invalid(field, "%v", err)
		}
		if strings.HasPrefix(value, sealedPrefix) {
			return invalid(field, "header %q: a value cannot start with %q", name, sealedPrefix)
		}
		lower := strings.ToLower(name)
		if other, dup := seen[lower]; dup && !(field == "secret-header" && in.Headers == nil) {
			return invalid(field, "header %q is given twice (as %q too); header names ignore case, so only one would be sent", name, other)
		} else if dup {
			delete(headers, other)
		}
		seen[lower] = name
		if secret || send.SecretByDefault(name) {
			if s.box == nil {
				return invalid(field, "header %q carries a credential and is stored sealed, which needs secrets.key (homing secrets genkey makes one)", name)
			}
			sealed, err := s.box.Seal(value)
			if err != nil {
				return &FieldError{Field: field, Message: field + ": " + err.Error(), Err: err}
			}
			value = sealedPrefix + sealed
		}
		headers[name] = value
		return nil
	}
	if in.Headers != nil {
		for _, h := range *in.Headers {
			if err := add(h, false, "header"); err != nil {
				return err
			}
		}
	}
	if in.SecretHeaders != nil {
		for _, h := range *in.SecretHeaders {
			if err := add(h, true, "secret-header"); err != nil {
				return err
			}
		}
	}
	w.Headers = headers
	return nil
}

// checkNumericHost refuses the numeric host forms that resolvers read as
// IPv4 addresses but Go's dialer and the SSRF guard see as names: a bare
// number (2130706433), hex (0x7f000001), octal or short dotted forms
// (127.1, 0177.0.0.1), and a trailing dot (localhost.).
func checkNumericHost(host string) error {
	if strings.HasSuffix(host, ".") {
		return invalid("url", "host %q ends with a dot; write it without (%s)", host, strings.TrimSuffix(host, "."))
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	parts := strings.Split(host, ".")
	for _, p := range parts {
		if p == "" {
			return nil
		}
		if _, err := strconv.ParseUint(p, 0, 32); err != nil {
			return nil // a name
		}
	}
	return invalid("url", "host %q is an address in a non-standard numeric form; write it as a dotted quad such as 203.0.113.7", host)
}

// Preview is what a webhook would send for a document, without sending it.
type Preview struct {
	// Matched reports whether the condition holds; when it does not, no
	// request would be made and the request fields are empty.
	Matched bool              `json:"matched"`
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// Error is why the request could not be built (the delivery would be
	// Exhausted with this reason).
	Error string `json:"error,omitempty"`
}

// Preview shows what webhook name would send for doc: the condition's
// answer, then the method, URL, headers (secrets masked) and body exactly as
// an attempt would send them, signed with the current secret under a
// placeholder delivery ID.
func (s *Service) Preview(ctx context.Context, tenant, name string, doc map[string]any) (Preview, error) {
	w, err := s.Get(ctx, tenant, name)
	if err != nil {
		return Preview{}, err
	}
	b, err := s.render(w, doc)
	if err != nil || !b.Matched || b.Error != "" {
		return b.Preview, err
	}
	h := b.header.Clone()
	for k, v := range MaskedHeaders(w.Headers) {
		if v == send.Masked {
			h.Set(k, v)
		}
	}
	// The headers are shown, the signatures' values are not: a preview of
	// any document would otherwise sign whatever body its caller chose
	// with the webhook's live secret, valid for the receiver (a signing
	// oracle for anyone who may preview but was never shown the secret).
	// So the secret is not even opened: the scheme's headers are made with
	// a placeholder, for their names, and their values masked.
	scheme := w.SignatureScheme
	var secrets []signing.Secret
	if w.Secret != "" {
		secrets = []signing.Secret{signing.Secret("preview: not the webhook's secret")}
	} else {
		scheme = signing.SchemeNone
	}
	signing.Sign(h, scheme, secrets, "preview", s.now(), b.body)
	for _, k := range []string{signing.HeaderSignature, signing.HeaderFrappe} {
		if h.Get(k) != "" {
			h.Set(k, send.Masked)
		}
	}
	b.Headers = flatHeaders(h)
	return b.Preview, nil
}

// rendered is a webhook's request for one document before it is shown or
// sent: Preview's fields (Headers unset), the plain headers with the body's
// Content-Type and the User-Agent, and the body. Sealed headers and
// signatures are the caller's: masked for a preview, opened and signed for a
// test send.
type rendered struct {
	Preview
	header http.Header
	body   []byte
}

// render evaluates w's condition and builds its request for doc, as fan-out
// does (dispatch.Build). A definition that cannot be evaluated now
// (budget.NoVerdict) is an error; one that cannot build a request is a
// Preview.Error.
func (s *Service) render(w models.Webhook, doc map[string]any) (rendered, error) {
	if doc == nil {
		doc = map[string]any{}
	}
	cond, err := condition.CompileIn(w.ConditionLanguage, w.Condition)
	if err != nil {
		return rendered{Preview: Preview{Error: err.Error()}}, nil
	}
	ok, err := cond.MatchWithin(doc, s.now(), s.defaults.ConditionTimeLimit)
	if budget.NoVerdict(err) {
		// No verdict on the webhook (the heap ceiling, the time limit):
		// the caller is told to try again.
		return rendered{}, notNow(w.Name, err)
	}
	if err != nil {
		return rendered{Preview: Preview{Error: err.Error()}}, nil
	}
	if !ok {
		return rendered{}, nil
	}
	fields := make([]delivery.Field, len(w.Fields))
	for i, f := range w.Fields {
		fields[i] = delivery.Field{Fieldname: f.Fieldname, Key: f.Key}
	}
	target := w.RequestURL
	if w.URLTemplate != "" {
		u, err := template.RenderURLWithin(w.URLTemplate, doc, w.Compat, s.now(), s.defaults.RenderTimeLimit)
		if budget.NoVerdict(err) {
			return rendered{}, notNow(w.Name, err)
		}
		if err != nil {
			return rendered{Preview: Preview{Matched: true, Method: w.RequestMethod, URL: w.URLTemplate, Error: "cannot build request: " + err.Error()}}, nil
		}
		target = u
	}
	body, contentType, err := delivery.Build(delivery.Spec{Structure: w.RequestStructure, Template: w.BodyTemplate, Fields: fields, MaxBytes: s.defaults.MaxPayloadBytes, Compat: w.Compat, Now: s.now(), TimeLimit: s.defaults.RenderTimeLimit}, doc)
	if budget.NoVerdict(err) {
		return rendered{}, notNow(w.Name, err)
	}
	if err != nil {
		return rendered{Preview: Preview{Matched: true, Method: w.RequestMethod, URL: target, Error: "cannot build request: " + err.Error()}}, nil
	}
	h := http.Header{}
	for k, v := range w.Headers {
		if !FromWebhook(k, v) {
			h.Set(k, v)
		}
	}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	if ua := s.defaults.UserAgent; ua != "" && h.Get("User-Agent") == "" {
		h.Set("User-Agent", ua)
	}
	return rendered{Preview: Preview{Matched: true, Method: w.RequestMethod, URL: target, Body: string(body)}, header: h, body: body}, nil
}

// flatHeaders is h as a view shows it: one value a name.
func flatHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = h.Get(k)
	}
	return out
}
