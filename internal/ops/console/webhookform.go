package console

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/models"
)

// webhookForm is the create and edit form's data: its fields as typed
// (kept when the service refuses them), and the refusal.
type webhookForm struct {
	// Editing is the name of the webhook being edited; "" creates one.
	Editing                                        string
	Name, DocType, Event, URL, URLTemplate, Method string
	Condition, ConditionLanguage, Structure        string
	Template, Fields, Headers                      string
	// Delivery settings, as typed: numbers and a duration are parsed by
	// input, so that a bad one is refused in the form with what was typed.
	MaxRetries, Timeout, RateLimit, FollowRedirects string
	Queue, Signature, Compat                        string
	// Ordering is "none" or "document"; "" (a form without it) changes
	// nothing. The portal's simple form shows it too: like the rate
	// limit, it is what the customer's receiver needs, not how Homing
	// runs.
	Ordering string
	// HeadersShown is the headers text the edit form showed (secrets as
	// ****): unchanged, the headers are left as they are.
	HeadersShown   string
	Description    string
	Enabled        bool
	GenerateSecret bool
	// Picker offers the event as one choice of EventTypes (the portal)
	// instead of a doctype and an event typed; EventType is the choice,
	// "Doctype:event".
	Picker     bool
	EventType  string
	EventTypes []tenant.EventType
	// Simple is the portal's form without the operator's settings
	// (Console.formMode): what it does not show, it leaves as it is.
	Simple bool
	// Error is the service's refusal, Field the field it names.
	Error, Field string
}

// Events and Methods are the form's choices: the document events, then
// those of Homing's operational events (doctype models.OpsDocType).
func (webhookForm) Events() []string  { return slices.Concat(models.DocEvents, models.OpsEvents) }
func (webhookForm) Methods() []string { return webhook.Methods }

// Signatures are the signature schemes a webhook can use.
func (webhookForm) Signatures() []string {
	return []string{signing.SchemeBoth, signing.SchemeStandard, signing.SchemeFrappe, signing.SchemeNone}
}

// formOf reads the form's fields from r (the secret is read apart, never
// kept in the form).
func formOf(r *http.Request) webhookForm {
	v := func(k string) string { return strings.ReplaceAll(r.PostFormValue(k), "\r\n", "\n") }
	return webhookForm{
		Name: v("name"), DocType: v("doctype"), Event: v("event"), URL: strings.TrimSpace(v("url")),
		URLTemplate: strings.TrimSpace(v("url_template")), Method: v("method"), Condition: v("condition"),
		ConditionLanguage: v("condition_language"), Structure: v("structure"), Template: v("template"),
		Fields: v("fields"), Headers: v("headers"), HeadersShown: v("headers_shown"),
		MaxRetries: strings.TrimSpace(v("max_retries")), Timeout: strings.TrimSpace(v("timeout")),
		RateLimit: strings.TrimSpace(v("rate_limit")), FollowRedirects: strings.TrimSpace(v("follow_redirects")),
		Queue: strings.TrimSpace(v("queue")), Signature: v("signature"), Compat: v("compat"), Ordering: v("ordering"),
		Description: v("description"), EventType: v("event_type"),
		Enabled: r.PostFormValue("enabled") != "", GenerateSecret: r.PostFormValue("generate_secret") != "",
	}
}

// compatHoming is the form's name for Compat "" (Homing's own bodies), so
// that an empty value can mean "not in the form".
const compatHoming = "homing"

// formFrom is the edit form of v.
func formFrom(v webhook.View) webhookForm {
	headers := headersText(v.Headers)
	return webhookForm{
		Editing: v.Name, Name: v.Name, DocType: v.DocType, Event: v.Event, URL: v.URL, URLTemplate: v.URLTemplate,
		Method: v.Method, Condition: v.Condition, ConditionLanguage: v.ConditionLanguage, Structure: v.Structure,
		Template: v.Template, Fields: strings.Join(v.Fields, "\n"), Headers: headers, HeadersShown: headers, Enabled: v.Enabled,
		MaxRetries: strconv.Itoa(v.MaxRetries), Timeout: v.Timeout, RateLimit: strconv.Itoa(v.RateLimit),
		FollowRedirects: strconv.Itoa(v.FollowRedirects), Queue: v.Queue, Signature: v.Signature, Compat: cmp.Or(v.Compat, compatHoming),
		Description: v.Description, EventType: tenant.EventType{DocType: v.DocType, Event: v.Event}.String(), Ordering: v.Ordering,
	}
}

// headersText is headers one "Name: Value" a line, by name.
func headersText(headers map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		fmt.Fprintf(&b, "%s: %s\n", k, headers[k])
	}
	return b.String()
}

// lines are text's non-blank lines.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// input is the service's input for f: every field given, for a create
// (was nil), or the fields that differ from was, for an edit, so that an
// edit changes only what the person changed (re-enabling, for one, resets a
// webhook's health).
func (f webhookForm) input(was *webhook.View, secret string) (webhook.Input, error) {
	var in webhook.Input
	str := func(form string, old string, dst **string, optional bool) {
		if was == nil && optional && strings.TrimSpace(form) == "" {
			return
		}
		if was == nil || form != old {
			*dst = &form
		}
	}
	var old webhook.View
	if was != nil {
		old = *was
	}
	str(f.Name, old.Name, &in.Name, false)
	str(f.DocType, old.DocType, &in.DocType, false)
	str(f.Event, old.Event, &in.Event, false)
	str(f.URL, old.URL, &in.URL, true)
	str(f.Description, old.Description, &in.Description, true)
	if err := number(was != nil, "rate_limit", f.RateLimit, old.RateLimit, &in.RateLimit); err != nil {
		return in, err
	}
	if f.Ordering != "" && (was == nil || f.Ordering != old.Ordering) {
		ordering := f.Ordering
		in.Ordering = &ordering
	}
	// The simple form shows none of the rest: whatever was posted for it,
	// an edit leaves it as it is and a create takes the defaults.
	if !f.Simple {
		if err := f.definition(was, &in); err != nil {
			return in, err
		}
	}
	if was == nil || f.Enabled != old.Enabled {
		in.Enabled = &f.Enabled
	}
	if headers := lines(f.Headers); (was == nil && len(headers) > 0) || (was != nil && strings.TrimSpace(f.Headers) != strings.TrimSpace(f.HeadersShown)) {
		for _, h := range headers {
			if name, value, _ := strings.Cut(h, ":"); strings.TrimSpace(value) == send.Masked {
				return in, &webhook.FieldError{Field: "header", Message: fmt.Sprintf("header %s: its value is stored sealed and shown as %s; type the value again, or remove the line", strings.TrimSpace(name), send.Masked)}
			}
		}
		in.Headers = &headers
	}
	if secret != "" {
		in.Secret = &secret
	}
	return in, nil
}

// number reads a whole number typed in field into dst: "" is unchanged (or
// the default), and so, in an edit, is the stored value.
func number(editing bool, field, form string, old int, dst **int) error {
	if form == "" || (editing && form == strconv.Itoa(old)) {
		return nil
	}
	n, err := strconv.Atoi(form)
	if err != nil {
		return &webhook.FieldError{Field: field, Message: fmt.Sprintf("%s %q must be a whole number", strings.ReplaceAll(field, "_", " "), form)}
	}
	*dst = &n
	return nil
}

// definition adds to in the fields of the full form only: the body, the
// condition, the request's shape, the retry budget and the operator's
// settings (queue, compatibility, condition language, URL template,
// redirects, signature scheme).
func (f webhookForm) definition(was *webhook.View, in *webhook.Input) error {
	str := func(form string, old string, dst **string) {
		if was == nil && strings.TrimSpace(form) == "" {
			return
		}
		if was == nil || form != old {
			*dst = &form
		}
	}
	var old webhook.View
	if was != nil {
		old = *was
	}
	str(f.URLTemplate, old.URLTemplate, &in.URLTemplate)
	str(f.Method, old.Method, &in.Method)
	str(f.Condition, old.Condition, &in.Condition)
	str(f.ConditionLanguage, old.ConditionLanguage, &in.ConditionLanguage)
	str(f.Structure, old.Structure, &in.Structure)
	str(f.Template, old.Template, &in.Template)
	// Empty is "unchanged" (or the default) for these: a form without them
	// (an older page, a script) changes none of them.
	choice := func(form, old string, dst **string) {
		if form != "" && (was == nil || form != old) {
			*dst = &form
		}
	}
	choice(f.Queue, old.Queue, &in.Queue)
	choice(f.Signature, old.Signature, &in.Signature)
	if f.Compat != "" {
		// compatHoming is the form's name for "", Homing's own bodies.
		compat := f.Compat
		if compat == compatHoming {
			compat = ""
		}
		if was == nil || compat != old.Compat {
			in.Compat = &compat
		}
	}
	if err := number(was != nil, "max_retries", f.MaxRetries, old.MaxRetries, &in.MaxRetries); err != nil {
		return err
	}
	if err := number(was != nil, "follow_redirects", f.FollowRedirects, old.FollowRedirects, &in.FollowRedirects); err != nil {
		return err
	}
	if f.Timeout != "" && (was == nil || f.Timeout != old.Timeout) {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil {
			return &webhook.FieldError{Field: "timeout", Message: fmt.Sprintf("timeout %q must be a duration such as 10s or 1500ms", f.Timeout)}
		}
		in.Timeout = &d
	}
	if was != nil && in.URL != nil && *in.URL == "" && f.URLTemplate != "" {
		in.URL = nil // the URL comes from the template
	}
	if fields := lines(f.Fields); (was == nil && len(fields) > 0) || (was != nil && !slices.Equal(fields, old.Fields)) {
		in.Fields = &fields
	}
	return nil
}

// formMode sets what f shows for r's session. A portal picks the event from
// the tenant's catalog (inspect.EventCatalog) and, unless the operator
// turned on the tenant's portal_advanced, shows only what a customer needs
// (Simple): the URL, the event, a description, headers, the rate limit,
// enabled and the secret. The console shows everything, typed.
func (c *Console) formMode(r *http.Request, f *webhookForm) error {
	if !isPortal(r) {
		return nil
	}
	t, err := c.tenants.Get(r.Context(), tenantOf(r))
	if err != nil {
		return err
	}
	f.Picker, f.Simple = true, !t.PortalAdvanced // as Console.simple
	f.EventTypes, err = inspect.EventCatalog(r.Context(), c.cfg.DB, tenantOf(r), t.EventTypes)
	return err
}

// pick reads the picked event into f's doctype and event, refusing one that
// is not in the list.
func (f *webhookForm) pick() error {
	if !f.Picker {
		return nil
	}
	if strings.TrimSpace(f.EventType) == "" {
		return &webhook.FieldError{Field: "event_type", Message: "pick the event this endpoint receives from the list"}
	}
	et, err := tenant.ParseEventType(f.EventType)
	if err == nil && !slices.Contains(f.EventTypes, et) {
		err = errors.New("not in the list")
	}
	if err != nil {
		return &webhook.FieldError{Field: "event_type", Message: fmt.Sprintf("event %q is not one this account sends; pick one from the list (your provider can add event types)", f.EventType)}
	}
	f.DocType, f.Event = et.DocType, et.Event
	return nil
}

// newWebhook is GET {p}new-webhook: the create form. It lives outside
// {p}webhooks/ so that every name, "new" too, opens its own webhook.
func (c *Console) newWebhook(w http.ResponseWriter, r *http.Request, s session) {
	f := webhookForm{Event: "on_submit", Method: "POST", Structure: delivery.StructureJSON, ConditionLanguage: models.ConditionExpr, Enabled: true}
	if err := c.formMode(r, &f); err != nil {
		c.fail(w, r, err)
		return
	}
	f.GenerateSecret = f.Picker // a customer's endpoint is signed unless they say otherwise
	c.render(w, r, http.StatusOK, "webhookform", view{Title: "New webhook", Now: c.now(), Data: f})
}

// createWebhook is POST {p}webhooks: webhook.Service.Create in the
// session's tenant, under its bounds (max_webhooks, the evaluation's
// limits); a refusal shows the form again with what was typed.
func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request, s session) {
	f := formOf(r)
	if err := c.formMode(r, &f); err != nil {
		c.fail(w, r, err)
		return
	}
	secret := r.PostFormValue("secret")
	if f.GenerateSecret {
		if secret != "" {
			f.Error, f.Field = "give a secret or generate one, not both", "secret"
			c.render(w, r, http.StatusBadRequest, "webhookform", view{Title: "New webhook", Now: c.now(), Data: f})
			return
		}
		gen, err := signing.GenerateSecret()
		if err != nil {
			c.fail(w, r, err)
			return
		}
		secret = string(gen)
	}
	err := f.pick()
	var in webhook.Input
	if err == nil {
		in, err = f.input(nil, secret)
	}
	var hook models.Webhook
	if err == nil {
		hook, err = c.cfg.Webhooks.Create(r.Context(), tenantOf(r), in)
	}
	if err != nil {
		c.refuseForm(w, r, "New webhook", f, err)
		return
	}
	c.log.Info("console: webhook created", "tenant", hook.Tenant, "webhook", hook.Name, "token", s.token.Name)
	if f.GenerateSecret {
		c.showSecret(w, r, hook, secret, "Webhook "+hook.Name+" created.", "")
		return
	}
	http.Redirect(w, r, base(r)+"webhooks/"+url.PathEscape(hook.Name)+"?notice=created", http.StatusSeeOther)
}

// editWebhook is GET {p}webhooks/{name}/edit: the form with the webhook's
// values (secret headers as ****, the secret never).
func (c *Console) editWebhook(w http.ResponseWriter, r *http.Request, s session) {
	v, ok := c.webhookOnly(w, r)
	if !ok {
		return
	}
	f := formFrom(v)
	if err := c.formMode(r, &f); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "webhookform", view{Title: "Edit " + v.Name, Now: c.now(), Data: f})
}

// updateWebhook is POST {p}webhooks/{name}: webhook.Service.Update with the
// fields the person changed.
func (c *Console) updateWebhook(w http.ResponseWriter, r *http.Request, s session) {
	v, ok := c.webhookOnly(w, r)
	if !ok {
		return
	}
	f := formOf(r)
	f.Editing = v.Name
	if err := c.formMode(r, &f); err != nil {
		c.fail(w, r, err)
		return
	}
	err := f.pick()
	var in webhook.Input
	if err == nil {
		in, err = f.input(&v, r.PostFormValue("secret"))
	}
	var hook models.Webhook
	if err == nil {
		hook, err = c.cfg.Webhooks.Update(r.Context(), tenantOf(r), v.Name, in)
	}
	if err != nil {
		c.refuseForm(w, r, "Edit "+v.Name, f, err)
		return
	}
	c.log.Info("console: webhook updated", "tenant", hook.Tenant, "webhook", hook.Name, "token", s.token.Name)
	http.Redirect(w, r, base(r)+"webhooks/"+url.PathEscape(hook.Name)+"?notice=updated", http.StatusSeeOther)
}

// refuseForm shows the form again with err, what was typed kept: 400 for a
// field the service refused, 409 for a name taken or the tenant's
// max_webhooks, 503 for an evaluation that could not be done now, 404 for
// a webhook gone meanwhile.
func (c *Console) refuseForm(w http.ResponseWriter, r *http.Request, title string, f webhookForm, err error) {
	status, msg := formError(err)
	if status == http.StatusInternalServerError {
		c.fail(w, r, err)
		return
	}
	var fe *webhook.FieldError
	if errors.As(err, &fe) {
		f.Field = fe.Field
	}
	f.Error = msg
	c.render(w, r, status, "webhookform", view{Title: title, Now: c.now(), Data: f})
}

// formError is the status and message a refusal of the webhook service is
// shown with; 500 for what is no refusal.
func formError(err error) (int, string) {
	var fe *webhook.FieldError
	switch {
	case errors.As(err, &fe):
		return http.StatusBadRequest, fe.Message
	case errors.Is(err, webhook.ErrExists), errors.Is(err, webhook.ErrLimit), errors.Is(err, tenant.ErrDisabled):
		return http.StatusConflict, err.Error()
	case errors.Is(err, budget.ErrTimeLimit), errors.Is(err, budget.ErrOverloaded):
		msg := err.Error()
		if !strings.Contains(msg, "try again") {
			msg += "; the server is busy, try again shortly"
		}
		return http.StatusServiceUnavailable, msg
	case errors.Is(err, webhook.ErrNotFound):
		return http.StatusNotFound, err.Error()
	}
	return http.StatusInternalServerError, ""
}

// webhookOnly reads the session tenant's webhook {name}, or answers 404
// (another tenant's webhook too) or 500 itself and returns false.
func (c *Console) webhookOnly(w http.ResponseWriter, r *http.Request) (webhook.View, bool) {
	name := r.PathValue("name")
	hook, err := c.cfg.Webhooks.Get(r.Context(), tenantOf(r), name)
	if errors.Is(err, webhook.ErrNotFound) {
		c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
		return webhook.View{}, false
	}
	if err != nil {
		c.fail(w, r, err)
		return webhook.View{}, false
	}
	return webhook.ViewOf(hook), true
}

// secretView is the page that shows a webhook's signing secret, with how
// to verify what the webhook signs with it.
type secretView struct {
	Webhook, Secret, Done string
	// Grace is how long the old secret stays valid; "" when none.
	Grace string
	// Snippets verify a signature with Secret, in the webhook's schemes.
	Snippets []Snippet
}

// showSecret renders the page that shows hook's secret. It is neither
// logged nor stored in the clear.
func (c *Console) showSecret(w http.ResponseWriter, r *http.Request, hook models.Webhook, secret, done string, grace string) {
	c.render(w, r, http.StatusOK, "secret", view{Title: "Secret of " + hook.Name, Now: c.now(),
		Data: secretView{Webhook: hook.Name, Secret: secret, Done: done, Grace: grace,
			Snippets: Snippets(hook.SignatureScheme, signing.Secret(secret))}})
}

// revealForm is GET {p}webhooks/{name}/secret: the confirmation before the
// secret is shown. It shows nothing secret; its form POSTs, with the
// session's CSRF token, to revealSecret.
func (c *Console) revealForm(w http.ResponseWriter, r *http.Request, s session) {
	v, ok := c.webhookOnly(w, r)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "reveal", view{Title: "Reveal the secret of " + v.Name, Now: c.now(), Data: v})
}

// revealSecret is POST {p}webhooks/{name}/secret: the webhook's current
// signing secret and the snippets that verify with it. A POST carrying the
// session's CSRF token (action), so that no link or other site can make a
// browser show it; logged without the secret.
func (c *Console) revealSecret(w http.ResponseWriter, r *http.Request, s session) {
	name := r.PathValue("name")
	hook, secret, err := c.cfg.Webhooks.Secret(r.Context(), tenantOf(r), name)
	switch {
	case errors.Is(err, webhook.ErrNotFound):
		c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
		return
	case errors.Is(err, webhook.ErrNoSecret):
		c.message(w, r, http.StatusConflict, "No secret", "Webhook "+name+" signs nothing: it has no secret. Rotate secret on its page makes one.")
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: webhook secret revealed", "tenant", hook.Tenant, "webhook", hook.Name, "token", s.token.Name)
	c.showSecret(w, r, hook, string(secret), "", "")
}

// rotateSecret is POST {p}webhooks/{name}/rotate-secret: a new secret,
// generated, made current; the old one stays valid for
// webhook.DefaultRotationGrace, as `homing webhook rotate-secret` does.
func (c *Console) rotateSecret(w http.ResponseWriter, r *http.Request, s session) {
	name := r.PathValue("name")
	gen, err := signing.GenerateSecret()
	if err != nil {
		c.fail(w, r, err)
		return
	}
	hook, err := c.cfg.Webhooks.RotateSecret(r.Context(), tenantOf(r), name, string(gen), webhook.DefaultRotationGrace)
	if err != nil {
		if errors.Is(err, webhook.ErrNotFound) {
			c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
			return
		}
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: webhook secret rotated", "tenant", tenantOf(r), "webhook", name, "token", s.token.Name)
	c.showSecret(w, r, hook, string(gen), "Secret rotated.", webhook.DefaultRotationGrace.String())
}

// tryView is the preview and test send page's data.
type tryView struct {
	Webhook string
	// Doc is the document as typed, kept in the form.
	Doc     string
	Preview *webhook.Preview
	Test    *webhook.TestResult
	Error   string
}

// Sendable reports whether the preview would make a request.
func (t tryView) Sendable() bool {
	return t.Preview != nil && t.Preview.Matched && t.Preview.Error == ""
}

// tryDoc reads the document of the preview and test form; blank is the
// empty document. It is read as a published document is.
func tryDoc(r *http.Request) (string, map[string]any, error) {
	text := r.PostFormValue("doc")
	if strings.TrimSpace(text) == "" {
		return text, nil, nil
	}
	doc, err := event.DecodeDoc([]byte(text))
	if err != nil {
		return text, nil, fmt.Errorf("document: %v (give it as a JSON object, such as {\"name\": \"SO-1\"})", err)
	}
	return text, doc, nil
}

// previewWebhook is POST {p}webhooks/{name}/preview: what the webhook would
// send for the document, without sending it.
func (c *Console) previewWebhook(w http.ResponseWriter, r *http.Request, s session) {
	c.try(w, r, false)
}

// testWebhook is POST {p}webhooks/{name}/test: the preview's request sent
// once to the receiver, now, and its answer. No event, no delivery row.
func (c *Console) testWebhook(w http.ResponseWriter, r *http.Request, s session) {
	c.try(w, r, true)
}

func (c *Console) try(w http.ResponseWriter, r *http.Request, send bool) {
	name := r.PathValue("name")
	v := tryView{Webhook: name}
	text, doc, err := tryDoc(r)
	v.Doc = text
	status := http.StatusOK
	switch {
	case err != nil:
		status, v.Error = http.StatusBadRequest, err.Error()
	case send:
		var res webhook.TestResult
		res, err = c.cfg.Webhooks.TestSend(r.Context(), tenantOf(r), name, doc)
		v.Test, v.Preview = &res, &res.Preview
	default:
		var p webhook.Preview
		p, err = c.cfg.Webhooks.Preview(r.Context(), tenantOf(r), name, doc)
		v.Preview = &p
	}
	if err != nil && v.Error == "" {
		v.Test, v.Preview = nil, nil
		var re *webhook.RateError
		switch {
		case errors.Is(err, webhook.ErrNotFound):
			c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
			return
		case errors.As(err, &re):
			w.Header().Set("Retry-After", fmt.Sprint(int(re.RetryAfter.Seconds())+1))
			status, v.Error = http.StatusTooManyRequests, re.Error()
		case c.overRate(w, r, err):
			return
		case errors.Is(err, webhook.ErrNoSender):
			status, v.Error = http.StatusServiceUnavailable, err.Error()
		default:
			st, msg := formError(err)
			if st == http.StatusInternalServerError {
				c.fail(w, r, err)
				return
			}
			status, v.Error = st, msg
		}
	}
	c.render(w, r, status, "try", view{Title: "Try " + name, Now: c.now(), Data: v})
}
