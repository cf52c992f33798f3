package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// apiClient calls a running `homing serve` the way any HTTP client would.
type apiClient struct {
	base  string // http://host:port
	token string
	// pid is serve's process, when the test started it: a request is
	// waited for while serve computes (see call).
	pid int
}

// withToken is c calling with token instead.
func (c apiClient) withToken(token string) apiClient {
	c.token = token
	return c
}

// apiReply is one response: its status and JSON body.
type apiReply struct {
	status int
	body   map[string]any
	raw    string
}

func (c apiClient) call(t *testing.T, method, path, body string) apiReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	type answer struct {
		r   apiReply
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{r: apiReply{status: resp.StatusCode, raw: string(b)}, err: err}
	}()
	// The deadline is for a stall, not for the answer: a request that serve
	// is computing (a hostile definition validated to its step limit, on a
	// loaded machine) is waited for as long as serve's CPU time grows, as
	// within waits for a drain that keeps moving.
	var a answer
	within(t, waitTimeout, method+" "+path+" to be answered", func() (bool, string) {
		select {
		case a = <-answered:
			return true, ""
		default:
			if c.pid == 0 {
				return false, "waiting"
			}
			return false, "serve's CPU time " + cpuTime(c.pid).String()
		}
	})
	if a.err != nil {
		t.Fatalf("%s %s: %v", method, path, a.err)
	}
	r := a.r
	if b := []byte(r.raw); len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			t.Fatalf("%s %s: %d with a body that is not a JSON object: %s", method, path, r.status, b)
		}
	}
	return r
}

// expect calls and fails the test unless the status is want.
func (c apiClient) expect(t *testing.T, want int, method, path, body string) apiReply {
	t.Helper()
	r := c.call(t, method, path, body)
	if r.status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

func firstBody(rs []testreceiver.Request) string {
	if len(rs) == 0 {
		return ""
	}
	return string(rs[0].Body)
}

var apiAddr = regexp.MustCompile(`msg="api started" addr=(\S+)`)

// startAPI runs `homing serve` on a free loopback port and returns a client
// holding a new admin token.
func (s *system) startAPI(t *testing.T) apiClient {
	t.Helper()
	var tok map[string]any
	s.ok(t, &tok, "homing", "token", "create", "--name", "e2e", "--scope", "admin", "--json")
	p := s.start("homing", "api started", "serve")
	m := apiAddr.FindStringSubmatch(p.output.String())
	if m == nil {
		t.Fatalf("homing serve did not log its address:\n%s", p.output.String())
	}
	token, _ := tok["token"].(string)
	return apiClient{base: "http://" + m[1], token: token, pid: p.cmd.Process.Pid}
}

// TestHTTPAPIEndToEnd drives Homing over HTTP only, with real processes.
// First with worker and homing serve alone, so that serve's relay is the
// only one moving the outbox into Redis: create a webhook, publish an event
// (and publish it again), and the receiver gets it once. Then with the
// scheduler too: a workflow_transition that fails is retried through the
// API once its receiver is back. Every request arrives exactly once.
func TestHTTPAPIEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.start("worker", "worker started") // its one drain of the outbox is over now
	c := s.startAPI(t)
	db := s.openDB(t)

	var mu sync.Mutex
	up := false
	rc := testreceiver.Answers(t, func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	orders := testreceiver.Answers(t, func(int) int { return http.StatusOK })

	// No token, no entry; the document needs none.
	if r := c.withToken("").call(t, "GET", "/v1/webhooks", ""); r.status != http.StatusUnauthorized {
		t.Errorf("GET /v1/webhooks without a token: %d", r.status)
	}
	if r := c.withToken("").call(t, "GET", "/v1/openapi.json", ""); r.status != http.StatusOK || r.body["openapi"] == nil {
		t.Errorf("GET /v1/openapi.json: %d", r.status)
	}

	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q, "fields": ["name=order", "grand_total=total"]}`, orders.URL+"/orders"))
	const so = `{"id": "so-e2e", "doc_type": "Sales Order", "doc_name": "SO-9", "event": "on_submit", "doc": {"name": "SO-9", "grand_total": 1500, "customer": "ACME"}}`
	if r := c.expect(t, http.StatusAccepted, "POST", "/v1/events", so); r.body["event_id"] != "so-e2e" {
		t.Fatalf("202 body: %s", r.raw)
	}
	eventually(t, "the receiver to get the published event", func() (bool, string) {
		return len(orders.Requests()) == 1, fmt.Sprintf("%d requests", len(orders.Requests()))
	})
	// A producer retrying its publish: 200 with the original, nothing written.
	if r := c.expect(t, http.StatusOK, "POST", "/v1/events", so); r.body["event_id"] != "so-e2e" {
		t.Fatalf("repeat body: %s", r.raw)
	}
	var pending int64
	if err := db.Model(&models.OutboxEvent{}).Count(&pending).Error; err != nil || pending != 0 {
		t.Errorf("outbox holds %d rows (%v) after the repeat, want 0: a repeat writes nothing", pending, err)
	}
	page := c.expect(t, http.StatusOK, "GET", "/v1/deliveries?event_id=so-e2e", "")
	list, _ := page.body["deliveries"].([]any)
	if len(list) != 1 {
		t.Fatalf("deliveries of so-e2e: %s", page.raw)
	}
	soID, _ := list[0].(map[string]any)["id"].(string)

	// Sweeps need the scheduler (which relays too, from now on).
	s.start("scheduler", "scheduler started")

	created := c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "approvals", "doctype": "Leave Application", "event": "workflow_transition", "url": %q, "template": "{\"leave\": \"{{ doc.name }}\", \"state\": \"{{ doc.workflow_state }}\"}"}`,
		rc.URL+"/approvals"))
	if created.body["name"] != "approvals" || created.body["has_secret"] != false {
		t.Fatalf("created %v", created.body)
	}

	// The receiver is down: 502 naming the webhook, answered after the one
	// attempt was made.
	const wf = `{"id": "wf-e2e", "doc_type": "Leave Application", "doc_name": "LA-7", "event": "workflow_transition", "doc": {"name": "LA-7", "workflow_state": "Approved"}}`
	r := c.expect(t, http.StatusBadGateway, "POST", "/v1/events", wf)
	e, _ := r.body["error"].(map[string]any)
	failures, _ := e["failures"].([]any)
	if e["code"] != "delivery_failed" || e["event_id"] != "wf-e2e" || len(failures) != 1 {
		t.Fatalf("502 body: %s", r.raw)
	}
	id, _ := failures[0].(map[string]any)["delivery_id"].(string)
	if n := len(rc.Requests()); n != 1 {
		t.Fatalf("receiver got %d requests when the 502 came back, want 1", n)
	}
	// Publishing it again sends nothing.
	c.expect(t, http.StatusBadGateway, "POST", "/v1/events", wf)
	if n := len(rc.Requests()); n != 1 {
		t.Fatalf("receiver got %d requests after a repeated publish, want still 1", n)
	}

	// The receiver is back; retry through the API: the sweeper sends it.
	mu.Lock()
	up = true
	mu.Unlock()
	for range 2 { // pressed twice
		d := c.expect(t, http.StatusOK, "POST", "/v1/deliveries/"+id+"/retry", "")
		if d.body["status"] != "Failed" || d.body["next_retry"] == nil {
			t.Fatalf("after retry: %s", d.raw)
		}
	}
	var d apiReply
	eventually(t, "the retried delivery to be Delivered", func() (bool, string) {
		d = c.expect(t, http.StatusOK, "GET", "/v1/deliveries/"+id, "")
		return d.body["status"] == "Delivered", d.raw
	})
	if h, _ := d.body["history"].([]any); len(h) != 2 {
		t.Errorf("history has %d attempts, want 2: %s", len(h), d.raw)
	}
	page = c.expect(t, http.StatusOK, "GET", "/v1/deliveries?webhook=approvals&status=delivered", "")
	if list, _ := page.body["deliveries"].([]any); len(list) != 1 || page.body["next_cursor"] != nil {
		t.Errorf("GET /v1/deliveries: %s", page.raw)
	}

	s.stop() // homing serve exits 0 on SIGTERM, like the others
	if got := orders.Requests(); len(got) != 1 || string(got[0].Body) != `{"order":"SO-9","total":1500}` || got[0].Header.Get("webhook-id") != soID {
		t.Errorf("orders receiver got %d requests (first %q), want exactly one {\"order\":\"SO-9\",\"total\":1500} with webhook-id %s", len(got), firstBody(got), soID)
	}
	got := rc.Requests()
	if len(got) != 2 || got[0].Status != http.StatusServiceUnavailable || got[1].Status != http.StatusOK {
		t.Fatalf("receiver answered %v, want one 503 and one 200", statuses(got))
	}
	for i, g := range got {
		if want := `{"leave": "LA-7", "state": "Approved"}`; string(g.Body) != want {
			t.Errorf("request %d body %q, want %q", i+1, g.Body, want)
		}
		if g.Header.Get("webhook-id") != id {
			t.Errorf("request %d webhook-id %q, want %q", i+1, g.Header.Get("webhook-id"), id)
		}
	}
}
