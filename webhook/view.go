package webhook

import (
	"time"

	"github.com/homingdev/homing/models"
)

// View is a webhook as shown by `homing webhook show --json` and the API. It
// never carries a secret, only whether there is one.
type View struct {
	Name           string            `json:"name"`
	DocType        string            `json:"doctype"`
	Event          string            `json:"event"`
	Condition      string            `json:"condition"`
	URL            string            `json:"url"`
	Method         string            `json:"method"`
	Structure      string            `json:"structure"`
	Template       string            `json:"template"`
	Fields         []string          `json:"fields"`
	Headers        map[string]string `json:"headers"`
	HasSecret      bool              `json:"has_secret"`
	Signature      string            `json:"signature"`
	Enabled        bool              `json:"enabled"`
	DisabledReason string            `json:"disabled_reason,omitempty"`
	MaxRetries     int               `json:"max_retries"`
	Queue          string            `json:"queue"`
	Timeout        string            `json:"timeout"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

// ViewOf makes the public view of w.
func ViewOf(w models.Webhook) View {
	fields := make([]string, len(w.Fields))
	for i, f := range w.Fields {
		fields[i] = f.Fieldname + "=" + f.Key
	}
	headers := MaskedHeaders(w.Headers)
	scheme := w.SignatureScheme
	if w.Secret == "" {
		scheme = "none"
	}
	return View{
		Name: w.Name, DocType: w.DocType, Event: w.DocEvent, Condition: w.Condition,
		URL: w.RequestURL, Method: w.RequestMethod, Structure: w.RequestStructure,
		Template: w.BodyTemplate, Fields: fields, Headers: headers,
		HasSecret: w.Secret != "", Signature: scheme, Enabled: w.Enabled,
		DisabledReason: w.DisabledReason, MaxRetries: w.MaxRetries, Queue: w.Queue,
		Timeout: w.Timeout().String(), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

// ShownView is a webhook as shown right after a change that generated its
// secret (create, update, rotate-secret, and the API's POST and PATCH): the
// generated secret appears here, once, and nowhere else.
type ShownView struct {
	View
	Secret string `json:"secret,omitempty"`
}
