package api

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
)

// webhookRequest is the body of POST /v1/webhooks and PATCH
// /v1/webhooks/{name}: the fields of the webhook view that can be written,
// plus the secret. An absent (or null) field is "not given": the default on
// create, unchanged on PATCH.
type webhookRequest struct {
	Name      *string            `json:"name"`
	DocType   *string            `json:"doctype"`
	Event     *string            `json:"event"`
	Condition *string            `json:"condition"`
	URL       *string            `json:"url"`
	Method    *string            `json:"method"`
	Structure *string            `json:"structure"`
	Template  *string            `json:"template"`
	Fields    *[]string          `json:"fields"`
	Headers   *map[string]string `json:"headers"`
	// SecretHeaders are stored sealed and shown as ****.
	SecretHeaders *map[string]string `json:"secret_headers"`
	// SampleDoc is rendered and evaluated before the webhook is saved,
	// read as a published document is (docJSON).
	SampleDoc  json.RawMessage `json:"sample_doc"`
	Signature  *string         `json:"signature"`
	MaxRetries *int            `json:"max_retries"`
	Timeout    *string         `json:"timeout"`
	Queue      *string         `json:"queue"`
	Enabled    *bool           `json:"enabled"`
	RateLimit  *int            `json:"rate_limit"`
	// FollowRedirects is how many redirects an attempt follows (0: none).
	FollowRedirects *int `json:"follow_redirects"`
	// URLTemplate is a Jinja URL rendered with the document per event.
	URLTemplate *string `json:"url_template"`
	// Compat is "" or "frappe".
	Compat *string `json:"compat"`
	// ConditionLanguage is "expr" (the default) or "python".
	ConditionLanguage *string `json:"condition_language"`
	// Description is the webhook in its owner's words.
	Description *string `json:"description"`
	// Ordering is "none" (the default) or "document": each document's
	// deliveries in the order their events were accepted (PostgreSQL).
	Ordering *string `json:"ordering"`
	// Secret sets the signing secret ("" removes it); GenerateSecret makes
	// a new one, returned once in the response.
	Secret         *string `json:"secret"`
	GenerateSecret bool    `json:"generate_secret"`

	// Read-only fields of the view: refused with a message rather than as
	// unknown, since a client may have copied them from a GET.
	HasSecret      json.RawMessage `json:"has_secret"`
	DisabledReason json.RawMessage `json:"disabled_reason"`
	CreatedAt      json.RawMessage `json:"created_at"`
	UpdatedAt      json.RawMessage `json:"updated_at"`
	Health         json.RawMessage `json:"health"`
}

// webhookList is the body of GET /v1/webhooks.
type webhookList struct {
	Webhooks []webhook.View `json:"webhooks"`
}

// input turns the request into the webhook service's input, and reports
// whether a secret is to be generated.
func (req webhookRequest) input() (webhook.Input, bool, error) {
	for field, v := range map[string]json.RawMessage{"has_secret": req.HasSecret, "disabled_reason": req.DisabledReason, "created_at": req.CreatedAt, "updated_at": req.UpdatedAt, "health": req.Health} {
		if v != nil {
			return webhook.Input{}, false, invalidRequest(field, "%s is read-only: leave it out", field)
		}
	}
	sample, err := docJSON("sample_doc", req.SampleDoc)
	if err != nil {
		return webhook.Input{}, false, err
	}
	in := webhook.Input{
		Name: req.Name, DocType: req.DocType, Event: req.Event, Condition: req.Condition, URL: req.URL,
		Method: req.Method, Structure: req.Structure, Template: req.Template, Fields: req.Fields,
		Signature: req.Signature, MaxRetries: req.MaxRetries, Queue: req.Queue, Enabled: req.Enabled,
		Secret: req.Secret, SampleDoc: sample, RateLimit: req.RateLimit,
		FollowRedirects: req.FollowRedirects, URLTemplate: req.URLTemplate, Compat: req.Compat, ConditionLanguage: req.ConditionLanguage,
		Description: req.Description, Ordering: req.Ordering,
	}
	if req.Headers != nil {
		headers := make([]string, 0, len(*req.Headers))
		for _, k := range slices.Sorted(maps.Keys(*req.Headers)) {
			if strings.Contains(k, ":") {
				return in, false, invalidRequest("headers", "headers: %q: a header name cannot contain \":\"", k)
			}
			headers = append(headers, k+": "+(*req.Headers)[k])
		}
		in.Headers = &headers
	}
	if req.SecretHeaders != nil {
		headers := make([]string, 0, len(*req.SecretHeaders))
		for _, k := range slices.Sorted(maps.Keys(*req.SecretHeaders)) {
			if strings.Contains(k, ":") {
				return in, false, invalidRequest("secret_headers", "secret_headers: %q: a header name cannot contain \":\"", k)
			}
			headers = append(headers, k+": "+(*req.SecretHeaders)[k])
		}
		in.SecretHeaders = &headers
	}
	if req.Timeout != nil {
		d, err := time.ParseDuration(*req.Timeout)
		if err != nil {
			return in, false, invalidRequest("timeout", "timeout: %q is not a duration such as \"5s\" or \"1500ms\"", *req.Timeout)
		}
		in.Timeout = &d
	}
	if req.GenerateSecret && req.Secret != nil {
		return in, false, invalidRequest("generate_secret", "give secret or generate_secret, not both")
	}
	return in, req.GenerateSecret, nil
}

// withGeneratedSecret fills in.Secret with a new secret when asked to.
func withGeneratedSecret(in *webhook.Input, generate bool) (string, error) {
	if !generate {
		return "", nil
	}
	s, err := signing.GenerateSecret()
	if err != nil {
		return "", err
	}
	secret := string(s)
	in.Secret = &secret
	return secret, nil
}

// webhookPath is the URL of webhook name.
func webhookPath(name string) string { return "/v1/webhooks/" + url.PathEscape(name) }

// webhookNotFound maps the service's not-found to a 404 naming the webhook.
func webhookNotFound(name string, err error) error {
	if errors.Is(err, webhook.ErrNotFound) {
		return notFound("webhook %q not found (GET /v1/webhooks lists them)", name)
	}
	return err
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	ws, err := s.cfg.Webhooks.List(r.Context(), tenantOf(r.Context()))
	if err != nil {
		return err
	}
	out := webhookList{Webhooks: make([]webhook.View, len(ws))}
	for i, wh := range ws {
		out.Webhooks[i] = webhook.ViewOf(wh)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decodeWebhook reads a create or update body into the webhook service's
// input, with the secret it generated when the body asked for one ("" when
// not).
func decodeWebhook(r *http.Request) (webhook.Input, string, error) {
	var req webhookRequest
	if err := decode(r, &req); err != nil {
		return webhook.Input{}, "", err
	}
	in, generate, err := req.input()
	if err != nil {
		return webhook.Input{}, "", err
	}
	secret, err := withGeneratedSecret(&in, generate)
	if err != nil {
		return webhook.Input{}, "", err
	}
	return in, secret, nil
}

// createWebhook is POST /v1/webhooks: 201 with the webhook, its Location,
// and a generated secret shown this once.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	in, secret, err := decodeWebhook(r)
	if err != nil {
		return err
	}
	wh, err := s.cfg.Webhooks.Create(r.Context(), tenantOf(r.Context()), in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", webhookPath(wh.Name))
	writeJSON(w, http.StatusCreated, webhook.ShownView{View: webhook.ViewOf(wh), Secret: secret})
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	wh, err := s.cfg.Webhooks.Get(r.Context(), tenantOf(r.Context()), name)
	if err != nil {
		return webhookNotFound(name, err)
	}
	v := webhook.ViewOf(wh)
	h, err := s.cfg.Webhooks.Health(r.Context(), wh)
	if err != nil {
		return err
	}
	v.Health = &h
	writeJSON(w, http.StatusOK, v)
	return nil
}

// updateWebhook is PATCH /v1/webhooks/{name}: only the fields given change.
func (s *Server) updateWebhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	in, secret, err := decodeWebhook(r)
	if err != nil {
		return err
	}
	wh, err := s.cfg.Webhooks.Update(r.Context(), tenantOf(r.Context()), name, in)
	if err != nil {
		return webhookNotFound(name, err)
	}
	if wh.Name != name {
		w.Header().Set("Location", webhookPath(wh.Name))
	}
	writeJSON(w, http.StatusOK, webhook.ShownView{View: webhook.ViewOf(wh), Secret: secret})
	return nil
}

// deleteWebhook is DELETE /v1/webhooks/{name}: 204. Its deliveries stay.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := s.cfg.Webhooks.Delete(r.Context(), tenantOf(r.Context()), name); err != nil {
		return webhookNotFound(name, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// previewRequest is the body of POST /v1/webhooks/{name}/preview.
type previewRequest struct {
	// Doc is read as a published document is (docJSON).
	Doc json.RawMessage `json:"doc"`
}

// docJSON reads a document given in a request (field names it) as the
// worker reads a published one (event.DecodeDoc), so that a preview or a
// sample renders what a delivery would: an integer stays an int and 1500.0 a
// float, which compat frappe bodies write as Python does ("3", "1500.0").
// Absent or null is no document.
func docJSON(field string, raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	doc, err := event.DecodeDoc(raw)
	if err != nil {
		return nil, invalidRequest(field, "%s: %v (give the document as a JSON object)", field, err)
	}
	return doc, nil
}

// previewWebhook is POST /v1/webhooks/{name}/preview: what the webhook would
// send for doc, without sending it.
func (s *Server) previewWebhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	doc, err := previewDoc(r)
	if err != nil {
		return err
	}
	p, err := s.cfg.Webhooks.Preview(r.Context(), tenantOf(r.Context()), name, doc)
	if err != nil {
		return webhookNotFound(name, err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// testWebhook is POST /v1/webhooks/{name}/test: what previewWebhook shows,
// sent once to the receiver now, and its answer. No event, no delivery row;
// one a second per webhook (429 beyond).
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	doc, err := previewDoc(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Webhooks.TestSend(r.Context(), tenantOf(r.Context()), name, doc)
	if err != nil {
		return webhookNotFound(name, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// previewDoc is the document of a preview or test request's body.
func previewDoc(r *http.Request) (map[string]any, error) {
	var req previewRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return docJSON("doc", req.Doc)
}

// importWebhooks is POST /v1/webhooks/import: the body is Frappe's export
// of Webhook records (a list, or {"data": [...], "secrets": {name:
// secret}}); ?dry_run=true stores nothing. The answer reports each
// webhook: imported, updated or not_imported, with what was adapted and
// what needs a person.
func (s *Server) importWebhooks(w http.ResponseWriter, r *http.Request) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err, nil)
	}
	if err := checkBodyText(b); err != nil {
		return err
	}
	dryRun := false
	if v := r.URL.Query().Get("dry_run"); v != "" {
		if dryRun, err = strconv.ParseBool(v); err != nil {
			return invalidRequest("dry_run", "dry_run %q is not true or false", v)
		}
	}
	hooks, secrets, err := webhook.ParseFrappeExport(b)
	if err != nil {
		return invalidRequest("body", "%v", err)
	}
	results, err := s.cfg.Webhooks.ImportFrappe(r.Context(), tenantOf(r.Context()), hooks, secrets, dryRun)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, importResponse{DryRun: dryRun, Webhooks: results})
	return nil
}

// importResponse is the answer of POST /v1/webhooks/import.
type importResponse struct {
	DryRun   bool                   `json:"dry_run"`
	Webhooks []webhook.ImportResult `json:"webhooks"`
}
