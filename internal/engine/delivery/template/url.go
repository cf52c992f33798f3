package template

import (
	"cmp"
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/intake/event"
)

// MaxURLBytes caps a URL rendered from a webhook's URL template.
const MaxURLBytes = 8 << 10

// HasSyntax reports whether s holds Jinja tags, which a plain URL
// never should: Frappe's is_dynamic_url webhooks carry them in request_url.
func HasSyntax(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "{%")
}

// RenderURL renders a webhook's URL template with doc bound as `doc`, the
// way Frappe's enqueue_webhook does for is_dynamic_url
// (frappe/integrations/doctype/webhook/webhook.py, enqueue_webhook:
// frappe.render_template(webhook.request_url, get_context(doc))), under the
// same limits as a body template (MaxRenderTime, MaxRenderSteps, memory),
// and checks that the result is an absolute http(s) URL with a host.
// Surrounding white space is dropped, as requests drops it. The host is
// not checked here: the sender's SSRF guard checks it at dial time. Every
// error wraps send.ErrUnbuildable, but a stop that is no verdict
// (budget.NoVerdict).
//
// compat CompatFrappe renders it as Frappe's Jinja does (an unknown name as
// its tag, a missing field as None, Frappe's filters and helpers, whose
// nowdate() and now() read now; zero is the wall clock).
func RenderURL(src string, doc map[string]any, compat string, now time.Time) (u string, err error) {
	return RenderURLWithin(src, doc, compat, now, 0)
}

// RenderURLWithin is RenderURL with a time limit of its own
// (delivery.template_time_limit, as a body template's); zero is
// MaxRenderTime.
func RenderURLWithin(src string, doc map[string]any, compat string, now time.Time, limit time.Duration) (u string, err error) {
	limit = cmp.Or(limit, MaxRenderTime)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	defer recoverInto(&err)
	out, err := render(ctx, src, doc, MaxURLBytes, limit, renderMode{text: true, keepFloats: true, frappe: compat == CompatFrappe, now: now})
	if err != nil {
		// Renamed, not flattened: a stop that is no verdict (budget.NoVerdict)
		// must stay one, and a limit stays budget.ErrLimit.
		renamed := &renamedError{msg: "url template: " + strings.TrimPrefix(err.Error(), "template: "), err: err}
		if budget.NoVerdict(err) {
			return "", renamed
		}
		return "", send.Unbuildable("%w", renamed)
	}
	u = strings.TrimSpace(string(out))
	if err := CheckURL(u); err != nil {
		return "", send.Unbuildable("url template rendered %q: %w", u, err)
	}
	return u, nil
}

// FreezeDoc is doc as a delivery keeps it to render its webhook's URL
// template again on a retry (RenderFrozenURL): JSON in which integral
// floats stay floats (1500.0), so that the document decodes as the fan-out
// read it.
func FreezeDoc(doc map[string]any) (string, error) {
	b, err := python.Dumps(doc)
	if err != nil {
		return "", send.Unbuildable("keep the document for the url template: %v", err)
	}
	return string(b), nil
}

// RenderFrozenURL is RenderURL with a document FreezeDoc kept, within the
// time limit limit (zero is MaxRenderTime).
func RenderFrozenURL(src, frozen, compat string, now time.Time, limit time.Duration) (string, error) {
	doc, err := event.DecodeDoc([]byte(frozen))
	if err != nil {
		return "", send.Unbuildable("url template: the kept document: %v", err)
	}
	return RenderURLWithin(src, doc, compat, now, limit)
}

// ValidateURL parses src without rendering it.
func ValidateURL(src string) error {
	if strings.TrimSpace(src) == "" {
		return send.Unbuildable("url template is empty")
	}
	if err := Validate(src); err != nil {
		return send.Unbuildable("url template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	return nil
}

// CheckURL says why raw cannot be a receiver's URL: not absolute http(s),
// no host, or credentials in it.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return send.Unbuildable("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return send.Unbuildable("not an http(s) URL")
	}
	if u.Hostname() == "" {
		return send.Unbuildable("no host")
	}
	if u.User != nil {
		return send.Unbuildable("carries credentials; put them in a header instead")
	}
	return nil
}

// renamedError is err under another message, still matching what err
// wraps.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }

func (e *renamedError) Unwrap() error { return e.err }
