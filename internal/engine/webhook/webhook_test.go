package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

func ptr[T any](v T) *T { return &v }

func TestGuardRefusesInternalURLsAtCreation(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	box, _ := secretbox.New("")
	svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second, Guard: send.NewGuard(nil)}, nil)
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost/x", "http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://10.0.0.1/"} {
		_, err := svc.Create(context.Background(), "", webhook.Input{Name: ptr("w"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr(u)})
		if !errors.Is(err, webhook.ErrInvalid) || !errors.Is(err, send.ErrForbiddenTarget) || !strings.Contains(err.Error(), "allowed_networks") {
			t.Errorf("%s: %v, want a refusal naming delivery.allowed_networks", u, err)
		}
	}
	if _, err := svc.Create(context.Background(), "", webhook.Input{Name: ptr("ok"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://93.184.216.34/hook")}); err != nil {
		t.Fatalf("public address refused: %v", err)
	}
	if _, err := svc.Update(context.Background(), "", "ok", webhook.Input{URL: ptr("http://192.168.0.10/")}); !errors.Is(err, send.ErrForbiddenTarget) {
		t.Fatalf("update to a private address: %v", err)
	}
}

// TestOperationalEventsPairWithTheirDoctype: a webhook of doctype "Homing
// Webhook" listens to an operational event, and only it does.
func TestOperationalEventsPairWithTheirDoctype(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	box, _ := secretbox.New("")
	svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	ctx := context.Background()
	create := func(name, doctype, event string) error {
		_, err := svc.Create(ctx, "", webhook.Input{Name: ptr(name), DocType: ptr(doctype), Event: ptr(event), URL: ptr("https://example.com/hook")})
		return err
	}
	if err := create("alerts", models.OpsDocType, "exhausted"); err != nil {
		t.Fatalf("a subscriber of exhausted: %v", err)
	}
	for _, c := range []struct{ doctype, event, want string }{
		{models.OpsDocType, "on_submit", `"on_submit" is not an event of Homing Webhook; use one of failing, recovered, disabled, exhausted`},
		{"Order", "exhausted", `"exhausted" is not a document event; use one of after_insert`},
	} {
		err := create("w-"+c.event, c.doctype, c.event)
		var fe *webhook.FieldError
		if !errors.As(err, &fe) || fe.Field != "event" || !strings.Contains(fe.Message, c.want) {
			t.Errorf("%s × %s: %v, want a refusal of event saying %s", c.doctype, c.event, err, c.want)
		}
	}
	if _, err := svc.Update(ctx, "", "alerts", webhook.Input{DocType: ptr("Order")}); err == nil {
		t.Error("alerts moved to doctype Order while listening to exhausted")
	}
}

// TestErrorsNameTheField: every refusal is a *FieldError naming the input
// field, so the CLI and the API can each point at it.
func TestErrorsNameTheField(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	box, _ := secretbox.New("")
	svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	ctx := context.Background()
	valid := func(in webhook.Input) webhook.Input {
		if in.Name == nil {
			in.Name = ptr("w")
		}
		if in.DocType == nil {
			in.DocType = ptr("D")
		}
		if in.Event == nil {
			in.Event = ptr("on_update")
		}
		if in.URL == nil {
			in.URL = ptr("https://example.com/hook")
		}
		return in
	}
	for field, in := range map[string]webhook.Input{
		"name":        {Name: ptr(" ")},
		"event":       valid(webhook.Input{Event: ptr("on_save")}),
		"url":         valid(webhook.Input{URL: ptr("ftp://example.com")}),
		"method":      valid(webhook.Input{Method: ptr("GET")}),
		"field":       valid(webhook.Input{Fields: &[]string{"=x"}}),
		"header":      valid(webhook.Input{Headers: &[]string{"no colon"}}),
		"condition":   valid(webhook.Input{Condition: ptr("doc.(")}),
		"max-retries": valid(webhook.Input{MaxRetries: ptr(-1)}),
		"timeout":     valid(webhook.Input{Timeout: ptr(time.Hour)}),
		"secret":      valid(webhook.Input{Secret: ptr("a-long-enough-secret-1234")}), // no secrets.key
	} {
		_, err := svc.Create(ctx, "", in)
		var fe *webhook.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, webhook.ErrInvalid) {
			t.Errorf("%s: %v, want a *FieldError matching ErrInvalid", field, err)
			continue
		}
		if fe.Field != field || !strings.HasPrefix(fe.Message, field) {
			t.Errorf("%s: FieldError %+v does not name the field first", field, fe)
		}
	}
}

// TestDisableExhaustsPendingRetries: a disabled webhook is sent nothing
// more, so its Failed rows become Exhausted at once, on both databases and
// by both ways to disable; other webhooks' rows and final rows are kept.
func TestDisableExhaustsPendingRetries(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			box, _ := secretbox.New("")
			svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
			ctx := context.Background()
			hooks := map[string]models.Webhook{}
			for _, n := range []string{"a", "b", "c"} {
				w, err := svc.Create(ctx, "", webhook.Input{Name: ptr(n), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://example.com/" + n)})
				if err != nil {
					t.Fatal(err)
				}
				hooks[n] = w
			}
			now := time.Now().UTC()
			next := now.Add(time.Hour)
			row := func(id, hook, status string) models.Delivery {
				d := models.Delivery{ID: id, WebhookID: hooks[hook].ID, WebhookName: hook, EventID: id, DocType: "D", DocEvent: "on_update",
					Method: "POST", URL: "https://example.com/", Payload: []byte("{}"), Status: status, MaxRetries: 3, CreatedAt: now, UpdatedAt: now}
				if status == models.StatusFailed {
					d.NextRetry, d.Attempts, d.LastError = &next, 1, "HTTP 503"
				}
				return d
			}
			rows := []models.Delivery{
				row("a1", "a", models.StatusFailed), row("a2", "a", models.StatusDelivered),
				row("b1", "b", models.StatusFailed), row("c1", "c", models.StatusFailed),
			}
			if err := db.Create(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if _, err := svc.SetEnabled(ctx, "", "a", false, "receiver retired"); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Update(ctx, "", "b", webhook.Input{Enabled: ptr(false)}); err != nil {
				t.Fatal(err)
			}
			want := map[string]struct{ status, lastError string }{
				"a1": {models.StatusExhausted, "webhook disabled: receiver retired"},
				"a2": {models.StatusDelivered, ""},
				"b1": {models.StatusExhausted, "webhook disabled"},
				"c1": {models.StatusFailed, "HTTP 503"},
			}
			var got []models.Delivery
			if err := db.Order("id").Find(&got).Error; err != nil {
				t.Fatal(err)
			}
			for _, d := range got {
				w := want[d.ID]
				if d.Status != w.status || d.LastError != w.lastError || (d.Status == models.StatusExhausted && d.NextRetry != nil) {
					t.Errorf("%s: %s %q next_retry %v, want %s %q", d.ID, d.Status, d.LastError, d.NextRetry, w.status, w.lastError)
				}
			}
		})
	}
}

// A body template that is not JSON whatever the document holds is refused
// at creation, saying where; one that is JSON for real documents is not,
// whatever type its fields need (issue 25).
func TestTemplateThatCannotBeJSONIsRefused(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	box, _ := secretbox.New("")
	svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	for i, tc := range []struct {
		template, compat string
		refused          bool
	}{
		{template: `{"name": "{{ doc.name }}", "total": {{ doc.total }},}`, refused: true},
		{template: `{"name": {{ doc.name }} "total": {{ doc.total }}}`, refused: true},
		{template: `{"name": "{{ doc.name }}"`, refused: true},
		{template: `{"name": "{{ doc.name }}", "total": {{ doc.total }},}`, compat: models.CompatFrappe, refused: true},
		{template: `{"name": "{{ doc.name }}", "total": {{ doc.total }}}`},
		{template: `{"total": {{ doc.total }}}`, compat: models.CompatFrappe},
		{template: `{"name": "{{ doc["customer_name"] }}", "rate": {{ doc.get('rate') }}}`, compat: models.CompatFrappe},
		{template: `{"city": {{ doc.address.city }}, "n": {{ doc['items'] | length }}}`},
		{template: `{"items": [{% for i in doc.items %}{"qty": {{ i.qty }}}{% if not loop.last %},{% endif %}{% endfor %}]}`},
		{template: `{"items": [{% for i in doc.items %}{"qty": {{ i.qty }}, "rate": {{ i.rate }}}{% if not loop.last %},{% endif %}{% endfor %}]}`, compat: models.CompatFrappe},
		{template: `{% if doc.total > 100 %}{"big": true}{% else %}{"big": false}{% endif %}`},
	} {
		in := webhook.Input{Name: ptr(fmt.Sprintf("w%d", i)), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://example.com/hook"), Template: ptr(tc.template)}
		if tc.compat != "" {
			in.Compat = ptr(tc.compat)
		}
		_, err := svc.Create(context.Background(), "", in)
		switch {
		case tc.refused && (!errors.Is(err, webhook.ErrInvalid) || !strings.Contains(err.Error(), "not JSON") || !strings.Contains(err.Error(), "column")):
			t.Errorf("%s (compat %q): %v, want a refusal saying where the body is not JSON", tc.template, tc.compat, err)
		case !tc.refused && err != nil:
			t.Errorf("%s (compat %q) refused: %v", tc.template, tc.compat, err)
		}
	}
}
