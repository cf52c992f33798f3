package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/wiring/app"
)

// server is one test's API on its own PostgreSQL database, with a token of
// each scope.
type server struct {
	t       *testing.T
	db      *gorm.DB
	api     *api.Server
	srv     *httptest.Server
	publish string // a publish token
	admin   string // an admin token
	tokens  *token.Service
	box     *secretbox.Box
	// watcher is the server's database watcher (options.logger set), else nil.
	watcher *dbstate.Watcher
}

// options adjust newServer.
type options struct {
	maxBodyBytes     int64
	maxPayloadBytes  int
	maxInflightBytes int64
	// tenantInflightShare is api.tenant_inflight_share; 0 is the default.
	tenantInflightShare float64
	// renderTimeLimit is the webhook service's time limit for body
	// templates (webhook.Defaults.RenderTimeLimit); 0 is the default.
	renderTimeLimit time.Duration
	publishLimiter  api.PublishLimiter
	// actionLimiter, when set, charges resends, retries, recovers and test
	// sends to their tenant's action_rate (tenant.Actions), as serve does.
	actionLimiter tenant.Limiter
	// dsn, when set, is the database to open (through a testenv proxy)
	// instead of a fresh one.
	dsn string
	// logger, when set, gets the API's log, and the server a database
	// watcher (server.watcher) that answers /readyz.
	logger *slog.Logger
	// portalClock, when set, is the portal links' clock (their expiry).
	portalClock clock.Clock
	// webhookClock, when set, is the webhook service's clock (its test
	// sends' one-a-second budget, without a Redis limiter).
	webhookClock clock.Clock
	// linger, when set, is called on the API before it serves
	// (Server.SetLinger).
	linger func(*api.Server)
	// ready, when set, answers /readyz (Config.Ready).
	ready func(context.Context) error
}

func newServer(t *testing.T, opts ...func(*options)) *server {
	t.Helper()
	o := options{maxBodyBytes: 64 << 10, maxPayloadBytes: 16 << 10}
	for _, f := range opts {
		f(&o)
	}
	var db *gorm.DB
	if o.dsn == "" {
		db = testenv.Postgres(t)
	} else {
		var err error
		if db, err = store.OpenWith(o.dsn, store.Options{MaxOpenConns: 3}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close(db) })
	}
	var (
		watcher *dbstate.Watcher
		ready   func(context.Context) error
	)
	if o.logger != nil {
		watcher = dbstate.New(dbstate.Config{Probe: store.Probe(db), Logger: o.logger, Consequence: "requests are answered 503"})
		ready = watcher.Ready
	}
	if o.ready != nil {
		ready = o.ready
	}
	box := testenv.SecretBox(t)
	// The receivers are httptest servers on loopback: no SSRF guard.
	sender := send.NewSender(app.SenderConfig(config.Delivery{AllowPrivateNetworks: true}))
	t.Cleanup(sender.Close)
	tokens := token.New(db, nil, nil)
	hooks := webhook.New(db, box, o.webhookClock, webhook.Defaults{MaxRetries: 3, Timeout: 5 * time.Second, RenderTimeLimit: o.renderTimeLimit}, nil)
	hooks.SetSender(sender, nil)
	rec := recovery.New(db, nil, 0)
	if o.actionLimiter != nil {
		actions := tenant.NewActions(tenant.New(db, nil, nil), o.actionLimiter, nil)
		hooks.SetActions(actions)
		rec.SetActions(actions)
	}
	a := api.New(api.Config{
		DB:                  db,
		Dispatcher:          dispatch.New(db, sender, box, dispatch.Config{}),
		Webhooks:            hooks,
		Recovery:            rec,
		Tokens:              tokens,
		Portal:              portal.New(db, box.Subkey(portal.KeyLabel), o.portalClock),
		MaxBodyBytes:        o.maxBodyBytes,
		MaxPayloadBytes:     o.maxPayloadBytes,
		MaxInflightBytes:    o.maxInflightBytes,
		TenantInflightShare: o.tenantInflightShare,
		PublishLimiter:      o.publishLimiter,
		Database:            watcher,
		Ready:               ready,
		Logger:              o.logger,
	})
	if o.linger != nil {
		o.linger(a)
	}
	s := &server{t: t, db: db, api: a, srv: httptest.NewServer(a), tokens: tokens, box: box, watcher: watcher}
	t.Cleanup(s.srv.Close)
	var err error
	_, s.publish, err = tokens.Create(context.Background(), "producer", token.ScopePublish, "")
	if err != nil {
		t.Fatal(err)
	}
	_, s.admin, err = tokens.Create(context.Background(), "operator", token.ScopeAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// answer is a response to a request whose body the test writes itself
// (openPublish): its reply, whether the server closed the connection with
// it, or the client's error.
type answer struct {
	reply
	closed bool
	err    error
}

// openPublish starts a POST /v1/events whose body the caller writes through
// the returned pipe (length is its declared Content-Length; -1 sends it
// chunked), after first is written, and returns where its answer arrives.
// The pipe is closed when the test ends, before the server is.
func (s *server) openPublish(length int64, first string) (*io.PipeWriter, <-chan answer) {
	s.t.Helper()
	return s.openPublishAs(s.publish, length, first)
}

// openPublishAs is openPublish with token tok.
func (s *server) openPublishAs(tok string, length int64, first string) (*io.PipeWriter, <-chan answer) {
	s.t.Helper()
	return openRequest(s.t, s.srv, "/v1/events", length, first, func(req *http.Request) {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
	})
}

// openRequest sends a POST to srv's path, set up by prepare, declaring a
// body of length bytes, writes its first bytes and leaves the rest open:
// the test writes it, or the pipe is closed when the test ends, before the
// server is. The answer arrives on the channel.
func openRequest(t testing.TB, srv *httptest.Server, path string, length int64, first string, prepare func(*http.Request)) (*io.PipeWriter, <-chan answer) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	req, err := http.NewRequest("POST", srv.URL+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	prepare(req)
	req.ContentLength = length
	got := make(chan answer, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{reply{status: resp.StatusCode, header: resp.Header, body: b}, resp.Close, nil}
	}()
	if _, err := pw.Write([]byte(first)); err != nil {
		t.Fatal(err)
	}
	return pw, got
}

// reply is one response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return http.StatusText(r.status) + " " + string(r.body) }

// object decodes the reply as a JSON object.
func (r reply) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// apiErr is the error object of an error reply.
type apiErr struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Field    string `json:"field"`
	EventID  string `json:"event_id"`
	Failures []struct {
		Webhook    string `json:"webhook"`
		DeliveryID string `json:"delivery_id"`
		Error      string `json:"error"`
	} `json:"failures"`
}

// request sends a request with tok ("" for none) and body ("" for none).
func (s *server) request(method, path, tok, body string, header ...string) reply {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return s.send(req)
}

func (s *server) send(req *http.Request) reply {
	s.t.Helper()
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// expect sends the request and fails unless the status is want.
func (s *server) expect(want int, method, path, tok, body string, header ...string) reply {
	s.t.Helper()
	r := s.request(method, path, tok, body, header...)
	if r.status != want {
		s.t.Fatalf("%s %s: status %d, want %d\n%s", method, path, r.status, want, r.body)
	}
	if want != http.StatusNoContent && !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") && !strings.HasPrefix(path, "/healthz") && !strings.HasPrefix(path, "/readyz") {
		s.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, r.header.Get("Content-Type"))
	}
	return r
}

// refused sends the request and checks the JSON error: status, code, and
// field ("" when none is expected); it returns the error object.
func (s *server) refused(status int, code, field, method, path, tok, body string, header ...string) apiErr {
	s.t.Helper()
	r := s.expect(status, method, path, tok, body, header...)
	var e struct {
		Error *apiErr `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		s.t.Fatalf("%s %s: body is not {\"error\": …}: %s", method, path, r.body)
	}
	if e.Error.Code != code || e.Error.Field != field || e.Error.Message == "" {
		s.t.Errorf("%s %s: error %+v, want code %q field %q and a message", method, path, *e.Error, code, field)
	}
	var raw map[string]map[string]any
	_ = json.Unmarshal(r.body, &raw)
	if _, ok := raw["error"]["field"]; ok && field == "" {
		s.t.Errorf("%s %s: error carries an empty field: %s", method, path, r.body)
	}
	return *e.Error
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// compact re-encodes a JSON text without spaces, for comparisons.
func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
