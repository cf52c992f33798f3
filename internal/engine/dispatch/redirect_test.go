package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// An attempt follows its webhook's follow_redirects, read with the claim:
// with 0 the 303 is a failed attempt, with 2 the receiver at the end gets
// the request (a GET, since 303 turns into one) and the delivery is
// Delivered.
func TestAttemptFollowsTheWebhooksRedirects(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			var ends atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/end" && r.Method == http.MethodGet {
					ends.Add(1)
					return
				}
				http.Redirect(w, r, "/end", http.StatusSeeOther)
			}))
			t.Cleanup(srv.Close)
			now := time.Now().UTC().Truncate(time.Second)
			w := models.Webhook{
				ID: "w", Name: "orders", DocType: "Sales Order", DocEvent: "on_submit", RequestURL: srv.URL + "/start",
				RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
				Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
			}
			if err := db.Create(&w).Error; err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"d0", "d1"} {
				row := testenv.PlannedDelivery(id, "ev-"+id, "w", now.Add(-time.Hour))
				row.Attempts, row.NextRetry = 1, new(now.Add(-time.Minute))
				if err := db.Create(&row).Error; err != nil {
					t.Fatal(err)
				}
			}
			sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
			t.Cleanup(sender.Close)
			d := New(db, sender, nil, Config{Clock: clock.NewStub(now)})
			ctx := context.Background()
			out, err := d.Attempt(ctx, "d0", Retry)
			if err != nil || out.Status != models.StatusFailed || ends.Load() != 0 {
				t.Fatalf("follow_redirects 0: %+v %v, %d at the end; want a failed attempt, none", out, err, ends.Load())
			}
			if err := db.Model(&models.Webhook{}).Where("id = ?", "w").Update("follow_redirects", 2).Error; err != nil {
				t.Fatal(err)
			}
			out, err = d.Attempt(ctx, "d1", Retry)
			if err != nil || out.Status != models.StatusDelivered || ends.Load() != 1 {
				t.Fatalf("follow_redirects 2: %+v %v, %d at the end; want delivered through the redirect", out, err, ends.Load())
			}
		})
	}
}

// A webhook's URL template is rendered with the event's document at
// fan-out, and the document is kept with the delivery: the first attempt
// goes to the URL rendered then, and a retry renders the webhook's current
// template with the kept document, so a template fixed since reaches it.
func TestURLTemplateRendersPerDocument(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			srv := testreceiver.Answering(t, http.StatusServiceUnavailable)
			now := time.Now().UTC().Truncate(time.Second)
			w := models.Webhook{
				ID: "w", Name: "dyn", DocType: "Sales Order", DocEvent: "on_submit", URLTemplate: srv.URL + "/api/resource/{{ doc.doctype }}/{{ doc.name }}",
				RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
				Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
			}
			if err := db.Create(&w).Error; err != nil {
				t.Fatal(err)
			}
			sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
			t.Cleanup(sender.Close)
			clk := clock.NewStub(now)
			d := New(db, sender, nil, Config{Clock: clk})
			ctx := context.Background()
			pending, err := d.FanOut(ctx, Event{ID: "ev1", DocType: "Sales Order", Event: "on_submit", Doc: map[string]any{"doctype": "Sales Order", "name": "SO-0001", "amount": float64(1500)}})
			if err != nil || len(pending) != 1 {
				t.Fatalf("fan-out: %v %v", pending, err)
			}
			if out, err := d.Attempt(ctx, pending[0].ID, First); err != nil || out.Status != models.StatusFailed {
				t.Fatalf("first attempt: %+v %v", out, err)
			}
			if got := srv.Requests(); len(got) != 1 || got[0].URI != "/api/resource/Sales%20Order/SO-0001" {
				t.Fatalf("first attempt: %+v", got)
			}
			// A template that no longer renders for the kept document sends
			// nothing and counts no attempt: the row stays due, and says why
			// where homing stats looks (last_error "not sent: …").
			if err := db.Model(&models.Webhook{}).Where("id = ?", "w").Update("url_template", "{{ doc.no_such_field }}").Error; err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Hour)
			due := loadRow(t, db, pending[0].ID).NextRetry
			if _, err := d.Attempt(ctx, pending[0].ID, Retry); !errors.Is(err, ErrRequestUnbuildable) {
				t.Fatalf("retry with a broken template: %v, want ErrRequestUnbuildable", err)
			}
			if row := loadRow(t, db, pending[0].ID); row.Status != models.StatusFailed || row.Attempts != 1 || !row.NextRetry.Equal(*due) ||
				!strings.HasPrefix(row.LastError, NotSentPrefix) || !strings.Contains(row.LastError, "url_template") {
				t.Fatalf("after the broken template: %s, %d attempts, due %v (was %v), last_error %q", row.Status, row.Attempts, row.NextRetry, due, row.LastError)
			}
			if got := srv.Requests(); len(got) != 1 {
				t.Fatalf("a broken template sent %d requests", len(got)-1)
			}
			// The operator fixes the template: the retry renders the new one
			// with the document the delivery was made from (1500.0 still a
			// float, as the fan-out read it).
			if err := db.Model(&models.Webhook{}).Where("id = ?", "w").Update("url_template", srv.URL+"/other/{{ doc.name }}/{{ doc.amount }}").Error; err != nil {
				t.Fatal(err)
			}
			srv.SetStatus(http.StatusOK)
			clk.Advance(time.Hour)
			if out, err := d.Attempt(ctx, pending[0].ID, Retry); err != nil || out.Status != models.StatusDelivered {
				t.Fatalf("retry: %+v %v", out, err)
			}
			if got := srv.Requests(); len(got) != 2 || got[1].URI != "/other/SO-0001/1500.0" {
				t.Fatalf("retry: %+v, want it sent to the current template rendered with the kept document", got)
			}
		})
	}
}

// A compat frappe webhook sends Frappe's bytes (json.dumps of its data
// rows, in row order) with the Content-Type of its header rows, even with
// the form structure (Frappe's "Form URL-Encoded" sends the same JSON).
func TestCompatFrappeSendsFrappesBytes(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			srv := testreceiver.New(t)
			now := time.Now().UTC().Truncate(time.Second)
			for i, h := range []models.StringMap{{}, {"Content-Type": "application/x-www-form-urlencoded"}} {
				w := models.Webhook{
					ID: fmt.Sprintf("w%d", i), Name: fmt.Sprintf("f%d", i), DocType: "Sales Order", DocEvent: "on_submit", RequestURL: srv.URL,
					RequestMethod: "POST", RequestStructure: "form", Headers: h, SignatureScheme: "none", Compat: models.CompatFrappe,
					Fields:  models.FieldList{{Fieldname: "name", Key: "id"}, {Fieldname: "grand_total", Key: "total"}, {Fieldname: "customer", Key: "customer"}},
					Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
				}
				if err := db.Create(&w).Error; err != nil {
					t.Fatal(err)
				}
			}
			sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
			t.Cleanup(sender.Close)
			d := New(db, sender, nil, Config{Clock: clock.NewStub(now)})
			ctx := context.Background()
			doc, err := event.DecodeDoc([]byte(`{"name": "SO-0001", "grand_total": 1500.0, "customer": "Caf\u00e9 Nord"}`))
			if err != nil {
				t.Fatal(err)
			}
			pending, err := d.FanOut(ctx, Event{ID: "ev1", DocType: "Sales Order", Event: "on_submit", Doc: doc})
			if err != nil || len(pending) != 2 {
				t.Fatalf("fan-out: %v %v", pending, err)
			}
			want := `{"id": "SO-0001", "total": 1500.0, "customer": "Caf\u00e9 Nord"}`
			var types []string
			for _, p := range pending {
				if out, err := d.Attempt(ctx, p.ID, First); err != nil || out.Status != models.StatusDelivered {
					t.Fatalf("attempt: %+v %v", out, err)
				}
			}
			reqs := srv.Requests()
			if len(reqs) != len(pending) {
				t.Fatalf("the receiver got %d requests, want %d", len(reqs), len(pending))
			}
			for _, g := range reqs {
				if string(g.Body) != want {
					t.Fatalf("body\n got %s\nwant %s", g.Body, want)
				}
				types = append(types, strings.Join(g.Header.Values("Content-Type"), ","))
			}
			slices.Sort(types)
			if !slices.Equal(types, []string{"", "application/x-www-form-urlencoded"}) {
				t.Fatalf("Content-Types %q, want none and the header row's", types)
			}
		})
	}
}

// A Homing webhook's data rows send each number as the published document
// wrote it: the Currency field 1500.0 as 1500.0, the Int field 3 as 3, in
// JSON and in a form (compat frappe: TestCompatFrappeSendsFrappesBytes).
func TestDataRowsSendNumbersAsPublished(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			srv := testreceiver.New(t)
			now := time.Now().UTC().Truncate(time.Second)
			want := map[string]string{"json": `{"id":"SO-0001","total":1500.0,"qty":3}`, "form": `id=SO-0001&total=1500.0&qty=3`}
			for structure := range want {
				w := models.Webhook{
					ID: structure, Name: structure, DocType: "Sales Order", DocEvent: "on_submit", RequestURL: srv.URL + "/" + structure,
					RequestMethod: "POST", RequestStructure: structure, Headers: models.StringMap{}, SignatureScheme: "none",
					Fields:  models.FieldList{{Fieldname: "name", Key: "id"}, {Fieldname: "grand_total", Key: "total"}, {Fieldname: "qty", Key: "qty"}},
					Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
				}
				if err := db.Create(&w).Error; err != nil {
					t.Fatal(err)
				}
			}
			sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
			t.Cleanup(sender.Close)
			d := New(db, sender, nil, Config{Clock: clock.NewStub(now)})
			ctx := context.Background()
			doc, err := event.DecodeDoc([]byte(`{"name": "SO-0001", "grand_total": 1500.0, "qty": 3}`))
			if err != nil {
				t.Fatal(err)
			}
			pending, err := d.FanOut(ctx, Event{ID: "ev1", DocType: "Sales Order", Event: "on_submit", Doc: doc})
			if err != nil || len(pending) != len(want) {
				t.Fatalf("fan-out: %v %v", pending, err)
			}
			for _, p := range pending {
				if out, err := d.Attempt(ctx, p.ID, First); err != nil || out.Status != models.StatusDelivered {
					t.Fatalf("attempt: %+v %v", out, err)
				}
			}
			reqs := srv.Requests()
			if len(reqs) != len(want) {
				t.Fatalf("the receiver got %d requests, want %d", len(reqs), len(want))
			}
			for _, g := range reqs {
				if structure := strings.TrimPrefix(g.URI, "/"); string(g.Body) != want[structure] {
					t.Errorf("%s body\n got %s\nwant %s", structure, g.Body, want[structure])
				}
			}
		})
	}
}

// Fan-out reads each webhook's condition in its language: Python's
// `doc.is_return == False` holds for a Check field of 0 (it was silently
// false when read as expr), and a false Python condition makes no row.
func TestFanOutEvaluatesPythonConditions(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			// The dispatcher's clock is what nowdate() reads.
			now := time.Date(2031, 1, 2, 12, 0, 0, 0, time.UTC)
			for id, cond := range map[string]string{
				"yes": "doc.is_return == False and (doc.base_total or 0) > 10000", "no": "not doc.customer",
				"today": "nowdate() == '2031-01-02'", "tomorrow": "nowdate() == '2031-01-03'",
			} {
				w := models.Webhook{
					ID: id, Name: id, DocType: "Sales Invoice", DocEvent: "on_submit", RequestURL: "http://127.0.0.1:1/",
					RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
					ConditionLanguage: models.ConditionPython, Condition: cond,
					Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
				}
				if err := db.Create(&w).Error; err != nil {
					t.Fatal(err)
				}
			}
			d := New(db, send.NewSender(send.SenderConfig{}), nil, Config{Clock: clock.NewStub(now)})
			doc, _ := event.DecodeDoc([]byte(`{"name": "SINV-1", "customer": "C", "is_return": 0, "base_total": 12000.0}`))
			pending, err := d.FanOut(context.Background(), Event{ID: "ev1", DocType: "Sales Invoice", Event: "on_submit", Doc: doc})
			var names []string
			for _, p := range pending {
				names = append(names, p.WebhookName)
			}
			slices.Sort(names)
			if err != nil || !slices.Equal(names, []string{"today", "yes"}) {
				t.Fatalf("fan-out: %v %v; want deliveries for the webhooks whose Python condition holds on the dispatcher's day", names, err)
			}
		})
	}
}

// A webhook's sealed headers, credentials and signatures reach only its own
// origin: the receiver a redirect sends the attempt to on another port gets
// the body and the plain headers, and no Referer naming the webhook's URL.
func TestAttemptRedirectToAnotherOriginDropsSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	box := testenv.SecretBox(t)
	other := testreceiver.New(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landed", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(origin.Close)

	clk := clock.NewStub(time.Now())
	hooks := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	name, doctype, ev, url, secret, follow := "moved", "Sales Order", "on_submit", origin.URL+"/hook?token=t0", "whsec_"+strings.Repeat("A", 43)+"=", 10
	headers := []string{"X-Tenant: acme", "Authorization: Bearer b"}
	sealed := []string{"X-Api-Key: k1", "X-Auth-Token: t1", "X-Custom: sealed"}
	if _, err := hooks.Create(ctx, "", webhook.Input{Name: &name, DocType: &doctype, Event: &ev, URL: &url, Headers: &headers, SecretHeaders: &sealed, Secret: &secret, FollowRedirects: &follow}); err != nil {
		t.Fatal(err)
	}
	d := New(db, send.NewSender(send.SenderConfig{}), box, Config{Clock: clk})
	pending, err := d.FanOut(ctx, Event{ID: "evt-moved", DocType: doctype, Event: ev, Doc: map[string]any{"name": "SO-1"}})
	if err != nil || len(pending) != 1 {
		t.Fatalf("FanOut = %v, %v; want one pending delivery", pending, err)
	}
	if out, err := d.Attempt(ctx, pending[0].ID, First); err != nil || out.Status != models.StatusDelivered {
		t.Fatalf("attempt = %+v, %v; want Delivered through the redirect", out, err)
	}
	got := other.Requests()
	if len(got) != 1 || got[0].Path != "/landed" || len(got[0].Body) == 0 || got[0].Header.Get("X-Tenant") != "acme" {
		t.Fatalf("the other origin got %+v; want the POST with its body and X-Tenant", got)
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Auth-Token", "X-Custom", "Webhook-Signature", "Webhook-Timestamp", "X-Frappe-Webhook-Signature", "Referer"} {
		if v := got[0].Header.Get(h); v != "" {
			t.Errorf("the other origin got %s: %q", h, v)
		}
	}
}
