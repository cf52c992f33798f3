package dispatch

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

const corpus = "../webhook/testdata/frappe"

// frappeExpectation is one entry of expected.json, worked out by
// expected.py from Frappe's own code.
type frappeExpectation struct {
	Webhook string            `json:"webhook"`
	Doc     string            `json:"doc"`
	Sent    bool              `json:"sent"`
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// The Frappe corpus: every webhook of webhooks.json (bench export-fixtures
// shape) is imported with secrets.json, every document of docs.json is
// published, and what a real receiver gets must be exactly what Frappe's
// enqueue_webhook sends (expected.json): method, URL, body bytes, the
// header rows, the Content-Type or its absence, and the
// X-Frappe-Webhook-Signature (computed by python3 with Frappe's
// get_webhook_headers, so the signatures verify with Frappe's check).
func TestFrappeCorpusSendsWhatFrappeSends(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(corpus, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var expected []frappeExpectation
	if err := json.Unmarshal(read("expected.json"), &expected); err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		Webhook string          `json:"webhook"`
		Doc     json.RawMessage `json:"doc"`
	}
	if err := json.Unmarshal(read("docs.json"), &docs); err != nil {
		t.Fatal(err)
	}
	var secrets map[string]string
	if err := json.Unmarshal(read("secrets.json"), &secrets); err != nil {
		t.Fatal(err)
	}
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			srv := testreceiver.New(t)
			box := testenv.SecretBox(t)
			now := time.Now().UTC().Truncate(time.Second)
			clk := clock.NewStub(now)
			svc := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
			ctx := context.Background()
			export := strings.ReplaceAll(string(read("webhooks.json")), "http://RECEIVER", srv.URL)
			hooks, _, err := webhook.ParseFrappeExport([]byte(export))
			if err != nil {
				t.Fatal(err)
			}
			results, err := svc.ImportFrappe(ctx, "", hooks, secrets, false)
			if err != nil {
				t.Fatal(err)
			}
			report := map[string]webhook.ImportResult{}
			for _, r := range results {
				report[r.Name] = r
			}
			if r := report["secret-missing"]; r.Status != webhook.ImportCreated || r.Enabled || len(r.NeedsHuman) != 1 || !strings.Contains(r.NeedsHuman[0], "no secret") {
				t.Errorf("secret-missing: %+v, want imported disabled with a note about the secret", r)
			}
			if r := report["needs-database"]; r.Status != webhook.ImportNotImported || len(r.NeedsHuman) == 0 || !strings.Contains(strings.Join(r.NeedsHuman, " "), "Frappe's database") {
				t.Errorf("needs-database: %+v, want not imported, saying it reads Frappe's database", r)
			}
			if r := report["customer-form"]; r.Status != webhook.ImportCreated || !r.Enabled || len(r.Adapted) == 0 {
				t.Errorf("customer-form: %+v, want imported and the form quirk noted", r)
			}

			// A second import of the same names replaces them, reported as
			// updated, and creates nothing; without --secrets the secrets
			// given before stay. A dry run stores nothing.
			before, _ := svc.List(ctx, "")
			for _, dry := range []bool{true, false} {
				again, err := svc.ImportFrappe(ctx, "", hooks, nil, dry)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range again {
					if r.Name != "needs-database" && r.Status != webhook.ImportUpdated {
						t.Errorf("second import (dry run %v) of %s: %+v, want updated", dry, r.Name, r)
					}
				}
			}
			after, _ := svc.List(ctx, "")
			if len(after) != len(before) || len(after) != len(hooks)-1 {
				t.Errorf("%d webhooks after a second import, %d before; want %d", len(after), len(before), len(hooks)-1)
			}
			if w, err := svc.Get(ctx, "", "so-submitted"); err != nil || w.Secret == "" || !w.Enabled || w.Compat != models.CompatFrappe ||
				w.ConditionLanguage != models.ConditionPython || w.FollowRedirects != 10 || w.SignatureScheme != "frappe" {
				t.Errorf("so-submitted after a second import without secrets: %+v %v", w, err)
			}

			d := New(db, send.NewSender(send.SenderConfig{UserAgent: "Homing"}), box, Config{Clock: clk})
			sent := 0 // requests the receiver has had
			for i, c := range docs {
				want := expected[i]
				doc, err := event.DecodeDoc(c.Doc)
				if err != nil {
					t.Fatal(err)
				}
				w, err := svc.Get(ctx, "", c.Webhook)
				if err != nil {
					t.Fatal(err)
				}
				pending, err := d.FanOut(ctx, Event{ID: "ev-" + want.Doc, DocType: w.DocType, Event: w.DocEvent, Doc: doc})
				if err != nil {
					t.Fatalf("%s: fan-out: %v", want.Doc, err)
				}
				if !want.Sent {
					if len(pending) != 0 {
						t.Errorf("%s/%s: Frappe's condition is false, but %d deliveries were made", want.Webhook, want.Doc, len(pending))
					}
					continue
				}
				if len(pending) != 1 {
					var rows []models.Delivery
					db.Where("event_id = ?", "ev-"+want.Doc).Find(&rows)
					t.Fatalf("%s/%s: %d pending deliveries (%+v), want 1", want.Webhook, want.Doc, len(pending), rows)
				}
				out, err := d.Attempt(ctx, pending[0].ID, First)
				if err != nil || out.Status != models.StatusDelivered {
					t.Fatalf("%s/%s: attempt %+v %v", want.Webhook, want.Doc, out, err)
				}
				reqs := srv.Requests()
				if len(reqs) != sent+1 {
					t.Fatalf("%s/%s: the receiver got %d requests, want %d", want.Webhook, want.Doc, len(reqs), sent+1)
				}
				sent++
				checkFrappeRequest(t, srv.URL, want, reqs[sent-1])
			}
		})
	}
}

func checkFrappeRequest(t *testing.T, base string, want frappeExpectation, g testreceiver.Request) {
	t.Helper()
	what := want.Webhook + "/" + want.Doc
	if g.Method != want.Method {
		t.Errorf("%s: method %s, want %s", what, g.Method, want.Method)
	}
	u, err := url.Parse(strings.ReplaceAll(want.URL, "http://RECEIVER", base))
	if err != nil {
		t.Fatal(err)
	}
	if g.URI != u.RequestURI() {
		t.Errorf("%s: URL %s, want %s", what, g.URI, u.RequestURI())
	}
	if string(g.Body) != want.Body {
		t.Errorf("%s: body\n got %s\nwant %s", what, g.Body, want.Body)
	}
	for k, v := range want.Headers {
		if got := g.Header.Values(k); !slices.Equal(got, []string{v}) {
			t.Errorf("%s: header %s = %q, want %q", what, k, got, v)
		}
	}
	if _, ok := want.Headers["Content-Type"]; !ok && g.Header.Get("Content-Type") != "" {
		t.Errorf("%s: Content-Type %q, but Frappe sends none without a header row", what, g.Header.Get("Content-Type"))
	}
	if _, ok := want.Headers["X-Frappe-Webhook-Signature"]; !ok && g.Header.Get("X-Frappe-Webhook-Signature") != "" {
		t.Errorf("%s: a signature was sent, but Frappe sends none without enable_security", what)
	}
}
