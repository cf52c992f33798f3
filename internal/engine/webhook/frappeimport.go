package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/models"
)

// FrappeWebhook is one Webhook record as Frappe exports it (`bench
// export-fixtures`, or GET /api/resource/Webhook with its child tables),
// with the fields of frappe/integrations/doctype/webhook/webhook.py.
// Numbers Frappe writes as 0/1 or strings are read leniently (flexInt).
type FrappeWebhook struct {
	Name             string          `json:"name"`
	DocType          string          `json:"webhook_doctype"`
	DocEvent         string          `json:"webhook_docevent"`
	Condition        string          `json:"condition"`
	RequestURL       string          `json:"request_url"`
	IsDynamicURL     flexInt         `json:"is_dynamic_url"`
	RequestMethod    string          `json:"request_method"`
	RequestStructure string          `json:"request_structure"`
	WebhookJSON      string          `json:"webhook_json"`
	EnableSecurity   flexInt         `json:"enable_security"`
	WebhookSecret    string          `json:"webhook_secret"`
	Timeout          flexInt         `json:"timeout"`
	Queue            string          `json:"background_jobs_queue"`
	Enabled          *flexInt        `json:"enabled"`
	Headers          []frappeHeader  `json:"webhook_headers"`
	Data             []frappeDataRow `json:"webhook_data"`
}

type frappeHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type frappeDataRow struct {
	Fieldname string `json:"fieldname"`
	Key       string `json:"key"`
}

// flexInt reads 0/1, true/false, "1" or null.
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch s {
	case "", "null", "false":
		*f = 0
	case "true":
		*f = 1
	default:
		var n float64
		if _, err := fmt.Sscan(s, &n); err != nil {
			return fmt.Errorf("%s is not a number", b)
		}
		*f = flexInt(n)
	}
	return nil
}

// Import outcomes.
const (
	ImportCreated     = "imported"
	ImportUpdated     = "updated"
	ImportNotImported = "not_imported"
)

// ImportResult says what became of one Frappe webhook.
type ImportResult struct {
	Name string `json:"name"`
	// Status is imported, updated (a webhook of that name existed: it is
	// replaced by the import) or not_imported; a dry run says what would
	// happen.
	Status string `json:"status"`
	// Adapted lists what was changed to keep Frappe's behaviour.
	Adapted []string `json:"adapted,omitempty"`
	// NeedsHuman lists what a person must do; a webhook imported with such
	// a note may be disabled until then.
	NeedsHuman []string `json:"needs_human,omitempty"`
	// Enabled is whether the webhook is (or would be) enabled.
	Enabled bool `json:"enabled"`
}

// ParseFrappeExport reads Frappe's export: a JSON list of Webhook records
// (export-fixtures) or {"data": [...]} (GET /api/resource), the latter
// optionally with "secrets": {name: secret}.
func ParseFrappeExport(b []byte) ([]FrappeWebhook, map[string]string, error) {
	b = bytes.TrimSpace(b)
	var hooks []FrappeWebhook
	var secrets map[string]string
	switch {
	case len(b) > 0 && b[0] == '[':
		if err := json.Unmarshal(b, &hooks); err != nil {
			return nil, nil, fmt.Errorf("read Frappe export: %w", err)
		}
	case len(b) > 0 && b[0] == '{':
		var wrapped struct {
			Data    []FrappeWebhook   `json:"data"`
			Secrets map[string]string `json:"secrets"`
		}
		if err := json.Unmarshal(b, &wrapped); err != nil {
			return nil, nil, fmt.Errorf("read Frappe export: %w", err)
		}
		if wrapped.Data == nil {
			return nil, nil, errors.New(`read Frappe export: an object must hold the records under "data" (GET /api/resource/Webhook output)`)
		}
		hooks, secrets = wrapped.Data, wrapped.Secrets
	default:
		return nil, nil, errors.New("read Frappe export: want a JSON list of Webhook records (bench export-fixtures) or {\"data\": [...]}")
	}
	return hooks, secrets, nil
}

// ImportFrappe creates (or, for a name that exists, replaces) one Homing
// webhook per Frappe record, with compat frappe, Python conditions and 10
// redirects followed, so it sends what Frappe sent. secrets maps a
// webhook's name to its secret, which Frappe does not export; a record
// with enable_security and no secret is imported disabled. With dryRun
// nothing is stored. A record that cannot be imported is reported and the
// others go ahead.
func (s *Service) ImportFrappe(ctx context.Context, tenant string, hooks []FrappeWebhook, secrets map[string]string, dryRun bool) ([]ImportResult, error) {
	results := make([]ImportResult, 0, len(hooks))
	for _, fw := range hooks {
		in, res := mapFrappe(fw, secrets)
		if res.Status == ImportNotImported {
			results = append(results, res)
			continue
		}
		existing, err := s.Get(ctx, tenant, fw.Name)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return results, err
		}
		if exists {
			res.Status = ImportUpdated
			if in.Secret == nil && existing.Secret != "" && fw.EnableSecurity != 0 {
				// The secret given on an earlier import stays.
				res.NeedsHuman = dropSecretNote(res.NeedsHuman)
				in.Enabled = ptrBool(fw.Enabled == nil || *fw.Enabled != 0)
			}
		}
		res.Enabled = in.Enabled == nil || *in.Enabled
		switch {
		case dryRun:
			err = s.tryInput(ctx, tenant, in, exists)
		case exists:
			_, err = s.Update(ctx, tenant, fw.Name, in)
		default:
			_, err = s.Create(ctx, tenant, in)
		}
		if err != nil {
			// A webhook over the tenant's max_webhooks is reported as
			// not imported, as an invalid one is; the others go ahead.
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrLimit) {
				return results, err
			}
			res.Status = ImportNotImported
			res.NeedsHuman = append(res.NeedsHuman, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
		results = append(results, res)
	}
	return results, nil
}

const secretNote = "enable_security is on but no secret was given (Frappe does not export it): imported disabled; set it with webhook update --secret (or import again with --secrets) and enable it"

func dropSecretNote(notes []string) []string {
	out := notes[:0]
	for _, n := range notes {
		if n != secretNote {
			out = append(out, n)
		}
	}
	return out
}

func ptrBool(b bool) *bool { return &b }

// tryInput validates in as Create (or Update) would, storing nothing.
func (s *Service) tryInput(ctx context.Context, tenant string, in Input, exists bool) error {
	w := models.Webhook{RequestMethod: "POST", RequestStructure: delivery.StructureJSON, ConditionLanguage: models.ConditionExpr,
		Fields: models.FieldList{}, Headers: models.StringMap{}, SignatureScheme: signing.SchemeBoth}
	if exists {
		existing, err := s.Get(ctx, tenant, *in.Name)
		if err != nil {
			return err
		}
		w = existing
	}
	if err := s.apply(&w, in); err != nil {
		return err
	}
	if err := s.checkTarget(ctx, w.RequestURL); err != nil && w.RequestURL != "" {
		return err
	}
	return s.tryDefinition(w, in.SampleDoc)
}

// mapFrappe maps one record's fields, noting what it adapted and what needs
// a person.
func mapFrappe(fw FrappeWebhook, secrets map[string]string) (Input, ImportResult) {
	res := ImportResult{Name: fw.Name, Status: ImportCreated}
	if strings.TrimSpace(fw.Name) == "" {
		res.Status = ImportNotImported
		res.NeedsHuman = append(res.NeedsHuman, "the record has no name")
		return Input{}, res
	}
	compat, python, redirects := models.CompatFrappe, models.ConditionPython, 10
	in := Input{
		Name: ptrTo(fw.Name), DocType: ptrTo(fw.DocType), Event: ptrTo(fw.DocEvent),
		Compat: &compat, ConditionLanguage: &python, FollowRedirects: &redirects,
		Condition: ptrTo(strings.TrimSpace(fw.Condition)),
	}
	method := strings.ToUpper(strings.TrimSpace(fw.RequestMethod))
	if method == "" {
		method = "POST"
	}
	in.Method = &method

	url := strings.TrimSpace(fw.RequestURL)
	if fw.IsDynamicURL != 0 {
		in.URLTemplate = &url
		res.Adapted = append(res.Adapted, "is_dynamic_url: request_url became url_template")
	} else {
		if template.HasSyntax(url) {
			res.NeedsHuman = append(res.NeedsHuman, "request_url holds template tags but is_dynamic_url is off: Frappe sends it literally; set url or url_template by hand")
			res.Status = ImportNotImported
			return in, res
		}
		in.URL = &url
	}

	// webhook.py, validate_request_body: "Form URL-Encoded" clears
	// webhook_json, "JSON" clears webhook_data; get_webhook_data prefers the
	// data rows.
	structure := delivery.StructureJSON
	bodyTemplate := fw.WebhookJSON
	rows := fw.Data
	switch fw.RequestStructure {
	case "Form URL-Encoded":
		structure = delivery.StructureForm
		if strings.TrimSpace(bodyTemplate) != "" {
			res.Adapted = append(res.Adapted, "webhook_json dropped: Frappe clears it for Form URL-Encoded")
		}
		bodyTemplate = ""
		res.Adapted = append(res.Adapted, "Form URL-Encoded: the body is Frappe's JSON text, as Frappe sends it; the Content-Type comes from the header rows")
	case "JSON":
		if len(rows) > 0 {
			res.Adapted = append(res.Adapted, "webhook_data dropped: Frappe clears it for JSON")
		}
		rows = nil
	case "":
		if len(rows) > 0 && strings.TrimSpace(bodyTemplate) != "" {
			res.Adapted = append(res.Adapted, "webhook_json unused: Frappe sends the data rows when there are any")
			bodyTemplate = ""
		}
	default:
		res.Status = ImportNotImported
		res.NeedsHuman = append(res.NeedsHuman, fmt.Sprintf("request_structure %q is neither Form URL-Encoded nor JSON", fw.RequestStructure))
		return in, res
	}
	in.Structure = &structure
	in.Template = &bodyTemplate
	fields := make([]string, 0, len(rows))
	for _, r := range rows {
		key := r.Key
		if key == "" {
			key = r.Fieldname
		}
		fields = append(fields, r.Fieldname+"="+key)
	}
	in.Fields = &fields
	headers := make([]string, 0, len(fw.Headers))
	for _, h := range fw.Headers {
		// get_webhook_headers sends a row only when both are set.
		if h.Key != "" && h.Value != "" {
			headers = append(headers, h.Key+": "+h.Value)
		}
	}
	in.Headers = &headers

	timeout := time.Duration(fw.Timeout) * time.Second
	if timeout <= 0 {
		timeout = 5 * time.Second // enqueue_webhook: timeout=webhook.timeout or 5
	}
	if timeout > MaxTimeout {
		res.Adapted = append(res.Adapted, fmt.Sprintf("timeout %s lowered to the limit of %s", timeout, MaxTimeout))
		timeout = MaxTimeout
	}
	in.Timeout = &timeout
	if q := strings.TrimSpace(fw.Queue); q != "" {
		in.Queue = &q
	}
	enabled := fw.Enabled == nil || *fw.Enabled != 0
	if fw.EnableSecurity != 0 {
		secret := fw.WebhookSecret
		if s, ok := secrets[fw.Name]; ok {
			secret = s
		}
		scheme := signing.SchemeFrappe
		in.Signature = &scheme
		if secret == "" {
			res.NeedsHuman = append(res.NeedsHuman, secretNote)
			enabled = false
		} else {
			in.Secret = &secret
		}
	} else {
		none, empty := signing.SchemeNone, ""
		in.Signature, in.Secret = &none, &empty
	}
	in.Enabled = &enabled
	return in, res
}

func ptrTo(s string) *string { return &s }
