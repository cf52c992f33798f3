package webhook

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

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
	RateLimit      int               `json:"rate_limit"`
	// FollowRedirects is how many redirects an attempt follows.
	FollowRedirects int `json:"follow_redirects"`
	// URLTemplate is rendered with the document per event ("" when the
	// webhook sends to URL).
	URLTemplate string `json:"url_template"`
	// Compat is "" or "frappe" (Frappe's wire behaviour).
	Compat string `json:"compat"`
	// ConditionLanguage is "expr" or "python".
	ConditionLanguage string `json:"condition_language"`
	// Description is the webhook in its owner's words.
	Description string `json:"description"`
	// Ordering is "none" or "document" (each document's deliveries in
	// acceptance order).
	Ordering string `json:"ordering"`
	// Health is set by the views that read it (show, the API's GET).
	Health    *Health   `json:"health,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
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
		Timeout: w.Timeout().String(), RateLimit: w.RateLimit, FollowRedirects: w.FollowRedirects, URLTemplate: w.URLTemplate, Compat: w.Compat, ConditionLanguage: conditionLanguage(w.ConditionLanguage), Description: w.Description, Ordering: orderingOf(w.Ordering), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

// ShownView is a webhook as shown right after a change that generated its
// secret (create, update, rotate-secret, and the API's POST and PATCH): the
// generated secret appears here, once, and nowhere else.
type ShownView struct {
	View
	Secret string `json:"secret,omitempty"`
}

// Health states (models.WebhookHealth.State). A failing webhook's due
// retries are held back behind one probe at a time, 1, 2, 4 … s apart up to
// health.probe_interval (sweeper.ProbeGap), and the first success releases
// them.
const (
	HealthHealthy  = models.HealthHealthy
	HealthDegraded = models.HealthDegraded
	HealthFailing  = models.HealthFailing
)

// Health is a webhook's endpoint health as shown by `homing webhook show`,
// `homing stats` and the API.
type Health struct {
	State        string     `json:"state"`
	FailingSince *time.Time `json:"failing_since"`
	Failures     int        `json:"failures"`
	LastProbeAt  *time.Time `json:"last_probe_at"`
	// HeldBack counts due retries waiting for the probe (failing only).
	HeldBack int64 `json:"held_back"`
}

// HealthOf is the shown health of a webhook, given its health row and its
// held-back count.
func HealthOf(h models.WebhookHealth, heldBack int64) Health {
	out := Health{State: h.State(), FailingSince: h.FailingSince, Failures: h.Failures}
	if h.Failing() {
		out.LastProbeAt, out.HeldBack = h.ProbeAt, heldBack
	}
	return out
}

// Health reads webhook w's health: its webhook_health row and, while it is
// failing, how many due retries wait.
func (s *Service) Health(ctx context.Context, w models.Webhook) (Health, error) {
	var h models.WebhookHealth
	if err := s.db.WithContext(ctx).Where("webhook_id = ?", w.ID).Limit(1).Find(&h).Error; err != nil {
		return Health{}, fmt.Errorf("read health of webhook %q: %w", w.Name, err)
	}
	return ReadHealth(ctx, s.db, w.Name, h, s.now())
}

// ReadHealth is the shown health of the webhook named name whose health row
// is h: HealthOf, with the due retries it holds back counted as of now when
// it is failing (deliveries_due_webhook). `webhook show`, the API and
// `homing stats` all read it here.
func ReadHealth(ctx context.Context, db *gorm.DB, name string, h models.WebhookHealth, now time.Time) (Health, error) {
	var held int64
	if h.Failing() {
		if err := db.WithContext(ctx).Model(&models.Delivery{}).
			Where("webhook_id = ? AND status = ? AND next_retry <= ?", h.WebhookID, models.StatusFailed, now).
			Count(&held).Error; err != nil {
			return Health{}, fmt.Errorf("count held retries of webhook %q: %w", name, err)
		}
	}
	return HealthOf(h, held), nil
}

// conditionLanguage is how a stored language reads: "" is expr.
func conditionLanguage(l string) string {
	if l == "" {
		return models.ConditionExpr
	}
	return l
}

// orderingOf is how a view names w's ordering: "none" for a webhook built
// in memory without one.
func orderingOf(o string) string {
	if o == "" {
		return models.OrderingNone
	}
	return o
}
