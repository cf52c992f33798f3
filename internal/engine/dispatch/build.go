package dispatch

import (
	"fmt"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/models"
)

// Built is a delivery's request as a webhook's definition makes it from a
// document: what a delivery row freezes.
type Built struct {
	// URL is the URL rendered from the webhook's url_template, or its
	// request_url when it has none.
	URL string
	// Headers are the webhook's plain headers and the body's Content-Type;
	// sealed (credential) headers are never frozen: each attempt takes
	// them from the webhook as it is then (request).
	Headers models.StringMap
	// Payload is the body, never empty.
	Payload []byte
}

// Build makes w's request for doc, as fan-out does for each delivery and
// as a retry or resend of a delivery that could not be built does with the
// document it kept (BuildKept). Every error wraps send.ErrUnbuildable,
// but a stop that is no verdict on the definition (budget.NoVerdict).
func Build(w models.Webhook, doc map[string]any, maxPayload int, now time.Time) (Built, error) {
	return build(w, doc, maxPayload, 0, now)
}

// build is Build with the templates' time limit (zero is
// template.MaxRenderTime), which fan-out takes from Config.RenderTimeLimit.
func build(w models.Webhook, doc map[string]any, maxPayload int, renderTime time.Duration, now time.Time) (Built, error) {
	b := Built{URL: w.RequestURL}
	if w.URLTemplate != "" {
		u, err := template.RenderURLWithin(w.URLTemplate, doc, w.Compat, now, renderTime)
		if err != nil {
			return Built{}, err
		}
		b.URL = u
	}
	fields := make([]delivery.Field, len(w.Fields))
	for i, f := range w.Fields {
		fields[i] = delivery.Field{Fieldname: f.Fieldname, Key: f.Key}
	}
	body, contentType, err := delivery.Build(delivery.Spec{Structure: w.RequestStructure, Template: w.BodyTemplate, Fields: fields, MaxBytes: maxPayload, Compat: w.Compat, Now: now, TimeLimit: renderTime}, doc)
	if err != nil {
		return Built{}, err
	}
	if len(body) == 0 && CarriesBody(w.RequestMethod) {
		return Built{}, fmt.Errorf("%w: the body is empty and a %s request must carry one", send.ErrUnbuildable, w.RequestMethod)
	}
	b.Headers = make(models.StringMap, len(w.Headers)+1)
	for k, v := range w.Headers {
		if !webhook.FromWebhook(k, v) {
			b.Headers[k] = v
		}
	}
	if contentType != "" {
		// compat frappe has none of its own: its header rows say it.
		b.Headers["Content-Type"] = contentType
	}
	b.Payload = body
	return b, nil
}

// BuildKept is Build with the document a delivery kept (its url_doc,
// template.FreezeDoc).
func BuildKept(w models.Webhook, kept string, maxPayload int, now time.Time) (Built, error) {
	doc, err := event.DecodeDoc([]byte(kept))
	if err != nil {
		return Built{}, fmt.Errorf("%w: the kept document: %v", send.ErrUnbuildable, err)
	}
	return Build(w, doc, maxPayload, now)
}

// CarriesBody reports whether a request of method sends a body: every
// method a webhook may use but DELETE.
func CarriesBody(method string) bool { return send.CarriesBody(method) }
