package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// A URL with template tags (Frappe's is_dynamic_url request_url) was sent
// percent-encoded to the wrong path; it is refused at creation, pointing to
// url-template, which renders it per document and whose rendered host the
// SSRF guard checks (here with the sample document).
func TestURLTemplateAtCreation(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			box, _ := secretbox.New("")
			svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second, Guard: send.NewGuard(nil)}, nil)
			ctx := context.Background()
			base := func() webhook.Input {
				return webhook.Input{Name: ptr("dyn"), DocType: ptr("Sales Order"), Event: ptr("on_submit")}
			}

			in := base()
			in.URL = ptr("https://93.184.216.34/api/{{ doc.name }}")
			_, err := svc.Create(ctx, "", in)
			var fe *webhook.FieldError
			if !errors.As(err, &fe) || fe.Field != "url" || !strings.Contains(err.Error(), "--url-template") {
				t.Fatalf("url with template tags: %v, want refused pointing to --url-template", err)
			}

			in = base()
			in.URLTemplate = ptr("https://93.184.216.34/api/{{ doc.name | badfilter }}")
			if _, err := svc.Create(ctx, "", in); !errors.As(err, &fe) || fe.Field != "url-template" {
				t.Fatalf("url template with an unknown filter: %v, want refused", err)
			}

			in = base()
			in.URLTemplate = ptr("http://{{ doc.host }}/hook")
			in.SampleDoc = map[string]any{"host": "10.0.0.1"}
			if _, err := svc.Create(ctx, "", in); !errors.Is(err, send.ErrForbiddenTarget) && !strings.Contains(err.Error(), "allowed_networks") {
				t.Fatalf("url template rendering a private host: %v, want refused by the guard", err)
			}

			in = base()
			in.URLTemplate = ptr("https://93.184.216.34/api/{{ doc.name }}")
			w, err := svc.Create(ctx, "", in)
			if err != nil || w.URLTemplate != *in.URLTemplate || w.RequestURL != "" {
				t.Fatalf("url template without url: %+v %v", w, err)
			}
			got, err := svc.Get(ctx, "", "dyn")
			if err != nil || got.URLTemplate != *in.URLTemplate {
				t.Fatalf("stored: %q %v", got.URLTemplate, err)
			}
			p, err := svc.Preview(ctx, "", "dyn", map[string]any{"name": "SO-0001"})
			if err != nil || p.URL != "https://93.184.216.34/api/SO-0001" {
				t.Fatalf("preview URL %q %v", p.URL, err)
			}
		})
	}
}

// RenderURL renders with the document, and refuses what is no URL.
func TestRenderURL(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"name": "SO-1", "site": "erp.example.com", "n": int64(3)}
	for _, tc := range []struct{ src, want, err string }{
		{"https://x.example/api/{{ doc.name }}", "https://x.example/api/SO-1", ""},
		{" https://{{ doc.site }}/hook?n={{ doc.n }}\n", "https://erp.example.com/hook?n=3", ""},
		{"{{ doc.name }}", "", "not an http(s) URL"},
		{"https://{{ doc.missing }}/x", "", "missing"},
		{"https://x/{% for i in range(100000000) %}a{% endfor %}", "", "limit"},
	} {
		got, err := template.RenderURL(tc.src, doc, "", time.Time{})
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("%q: %q %v, want %q", tc.src, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %q %v, want an error with %q", tc.src, got, err, tc.err)
		}
	}
}

// A Python condition is compiled at creation, refused naming what is
// outside the subset, and kept with its language.
func TestPythonConditionAtCreation(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			box, _ := secretbox.New("")
			svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
			ctx := context.Background()
			in := webhook.Input{Name: ptr("py"), DocType: ptr("Sales Invoice"), Event: ptr("on_submit"), URL: ptr("https://93.184.216.34/hook"),
				ConditionLanguage: ptr("python"), Condition: ptr("[x for x in doc.items]")}
			var fe *webhook.FieldError
			if _, err := svc.Create(ctx, "", in); !errors.As(err, &fe) || fe.Field != "condition" || !strings.Contains(err.Error(), "comprehension") {
				t.Fatalf("comprehension: %v, want refused naming it", err)
			}
			in.Condition = ptr("doc.is_return == False and (doc.base_total or 0) > 10000")
			w, err := svc.Create(ctx, "", in)
			if err != nil || w.ConditionLanguage != "python" {
				t.Fatalf("create: %+v %v", w, err)
			}
			p, err := svc.Preview(ctx, "", "py", map[string]any{"is_return": int64(0), "base_total": 12000.0})
			if err != nil || !p.Matched {
				t.Fatalf("preview of a matching document: %+v %v", p, err)
			}
			// The expr reading of the same text does not compile: switching
			// the language back is refused, not silently false.
			if _, err := svc.Update(ctx, "", "py", webhook.Input{ConditionLanguage: ptr("expr")}); !errors.As(err, &fe) || fe.Field != "condition" {
				t.Fatalf("back to expr: %v, want the condition refused", err)
			}
			if v := webhook.ViewOf(w); v.ConditionLanguage != "python" {
				t.Fatalf("view: %q", v.ConditionLanguage)
			}
		})
	}
}
