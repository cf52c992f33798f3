// Package tests holds Homing's end-to-end test: the real binaries, run as
// processes against real PostgreSQL and Redis, delivering to an httptest
// receiver that goes down and comes back.
package tests

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// binDir holds the binaries TestMain builds once for every test (or make
// test built once for every package: testenv.Binaries), race-built when
// the tests are: the long-running processes (worker, scheduler, serve, run,
// dev) run from it. plainDir holds the same commands built without -race,
// which the one-shot commands (s.run) run from: a command line that
// starts, makes a query or two and exits has little for the race detector
// to see, and internal/wiring/cli's tests race-check its code in process,
// while a race-built run costs three times the CPU of a plain one (49 ms
// against 17 for a webhook list; the package makes about 900 of them).
// A system whose test is about resource limits runs every process plain
// (system.plain).
var binDir, plainDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(testenv.Run(m))
	}
	dir, err := os.MkdirTemp("", "homing-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, _, err := testenv.Binaries(dir, raceBuild)
	plain := bin
	if err == nil && raceBuild {
		plain, _, err = testenv.Binaries(filepath.Join(dir, testenv.PlainSubdir), false)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir, plainDir = bin, plain
	code := testenv.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// pollInterval paces every wait below; each wait has a deadline.
const (
	pollInterval = 100 * time.Millisecond
	waitTimeout  = 60 * time.Second
)

// eventually polls cond until it reports done, or fails the test at the
// deadline with cond's last word.
func eventually(t *testing.T, what string, cond func() (done bool, status string)) {
	t.Helper()
	within(t, waitTimeout, what, cond)
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// system is one Homing installation: its environment and its long-running
// processes.
type system struct {
	t     *testing.T
	env   []string
	procs []*process
	// plain runs the long-running processes from plainDir too: set by the
	// tests of resource limits (hostile definitions, intake budgets),
	// whose limits must hold in the build users run, and whose every
	// definition runs to its limit: 52 s of CPU race-built, 9 plain.
	// Processes that share their code are race-checked by every other
	// test of this package, and the engines by their packages' tests.
	plain bool
}

// bin is the directory s starts its long-running processes from.
func (s *system) bin() string {
	if s.plain {
		return plainDir
	}
	return binDir
}

type process struct {
	name   string
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan struct{}
	err    error // set when done is closed
}

func newSystem(t *testing.T) *system {
	t.Helper()
	dsn := testenv.PostgresDSN(t)
	opt, _ := testenv.Redis(t)
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOMING_") {
			env = append(env, kv)
		}
	}
	if raceBuild && os.Getenv("GORACE") == "" {
		// A race-built binary sleeps a second at exit (so that other
		// goroutines can still report a race) unless told not to: a second
		// on every command the tests run. Races are still reported, and
		// make the command exit 66.
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	env = append(env,
		"HOMING_DATABASE_URL="+dsn,
		"HOMING_REDIS_URL="+testenv.RedisURL(opt),
		"HOMING_RETRY_SCHEDULE=1s,2s",
		"HOMING_SWEEPER_INTERVAL=1s",
		"HOMING_SECRETS_KEY="+key,
		"HOMING_METRICS_ADDR=",
		// Tests run side by side on one PostgreSQL (max_connections 100):
		// three processes of three connections each is a system's share.
		"HOMING_DATABASE_MAX_OPEN_CONNS=3",
		"HOMING_WORKER_SHUTDOWN_TIMEOUT=10s",
		"HOMING_LOG_FORMAT=text",
		"HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true", // the receivers are on loopback
	)
	return &system{t: t, env: env}
}

// start runs a long-running binary (with args) until stop.
func (s *system) start(name string, ready string, args ...string) *process {
	t := s.t
	t.Helper()
	p := &process{name: name, output: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(s.bin(), name), args...)
	p.cmd.Env = s.env
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	s.procs = append(s.procs, p)
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.output.String())
		}
	})
	eventually(t, name+" to start", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("%s exited at start (%v):\n%s", name, p.err, p.output.String())
		default:
		}
		return strings.Contains(p.output.String(), ready), p.output.String()
	})
	return p
}

// stop sends SIGTERM to every process and checks that each exits 0.
func (s *system) stop() {
	t := s.t
	t.Helper()
	for _, p := range s.procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("signal %s: %v", p.name, err)
		}
	}
	for _, p := range s.procs {
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("%s did not exit 0 after SIGTERM: %v", p.name, p.err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("%s did not stop within %s of SIGTERM", p.name, waitTimeout)
		}
	}
}

// result is what one run of a command-line binary did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// run runs a command-line binary to completion. Like every helper a
// scenario calls, it takes the scenario's t: FailNow must run on the
// goroutine of the test that fails.
func (s *system) run(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(plainDir, name), args...)
	cmd.Env = s.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s %s: %v", name, strings.Join(args, " "), err)
	}
	return r
}

// ok runs a binary that must succeed and decodes its JSON output into v.
func (s *system) ok(t *testing.T, v any, name string, args ...string) {
	t.Helper()
	r := s.run(t, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: %s", name, strings.Join(args, " "), r)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			t.Fatalf("%s %s: output is not JSON: %v\n%s", name, strings.Join(args, " "), err, r.stdout)
		}
	}
}

// delivery is the part of `homing delivery show --json` the test reads.
type delivery struct {
	ID             string            `json:"id"`
	Webhook        string            `json:"webhook"`
	EventID        string            `json:"event_id"`
	Status         string            `json:"status"`
	Attempts       int               `json:"attempts"`
	MaxRetries     int               `json:"max_retries"`
	NextRetry      *time.Time        `json:"next_retry"`
	LastStatusCode *int              `json:"last_status_code"`
	Headers        map[string]string `json:"headers"`
	Payload        *string           `json:"payload"`
	History        []struct {
		Attempt    int       `json:"attempt"`
		At         time.Time `json:"at"`
		StatusCode *int      `json:"status_code"`
		DurationMS *int64    `json:"duration_ms"`
		Error      *string   `json:"error"`
	} `json:"history"`
}

// String shows d as the JSON it came from, for failure messages.
func (d delivery) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// deliveryOf waits for the fan-out of eventID to create one delivery, and
// returns its ID.
func (s *system) deliveryOf(t *testing.T, eventID string) string {
	t.Helper()
	var id string
	eventually(t, "a delivery of event "+eventID, func() (bool, string) {
		var list []delivery
		s.ok(t, &list, "homing", "delivery", "list", "--event-id", eventID, "--json")
		if len(list) > 1 {
			t.Fatalf("event %s has %d deliveries, want 1", eventID, len(list))
		}
		if len(list) == 1 {
			id = list[0].ID
		}
		return id != "", fmt.Sprintf("%d deliveries", len(list))
	})
	return id
}

// waitStatus waits until delivery id is in status, and returns it.
func (s *system) waitStatus(t *testing.T, id, status string) delivery {
	t.Helper()
	var d delivery
	eventually(t, "delivery "+id+" to be "+status, func() (bool, string) {
		d = delivery{}
		s.ok(t, &d, "homing", "delivery", "show", id, "--json")
		if d.Status != status && d.Status != "Failed" {
			t.Fatalf("delivery %s is %s, want %s: %+v", id, d.Status, status, d)
		}
		return d.Status == status, fmt.Sprintf("%s after %d attempts", d.Status, d.Attempts)
	})
	return d
}

// frappeSignature is what a Frappe receiver computes: base64 of the
// HMAC-SHA256 of the body, keyed with the secret string.
func frappeSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	s := newSystem(t)
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")

	// The receivers outlive the scenarios, so that after the processes stop
	// the test can check that nothing more arrived.
	outage := testreceiver.Answers(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable // down for the first attempt
		}
		return http.StatusOK // up again
	})
	broken := testreceiver.Answers(t, func(int) int { return http.StatusInternalServerError })
	approvals := testreceiver.Answers(t, func(int) int { return http.StatusInternalServerError })
	var exhaustedAttempts int

	t.Run("scenarios", func(t *testing.T) {
		t.Run("OutageThenRecovery", func(t *testing.T) {
			t.Parallel()
			outageThenRecovery(t, s, outage)
		})
		t.Run("Exhausted", func(t *testing.T) {
			t.Parallel()
			exhaustedAttempts = exhausted(t, s, broken)
		})
		t.Run("WorkflowTransitionFailure", func(t *testing.T) {
			t.Parallel()
			workflowTransitionFailure(t, s, approvals)
		})
	})

	s.stop()
	// Nothing arrives after a delivery is final.
	if n := len(outage.Requests()); n != 2 {
		t.Errorf("outage receiver got %d requests in all, want 2 (503, then 200)", n)
	}
	if n := len(broken.Requests()); n != 2 || exhaustedAttempts != 2 {
		t.Errorf("always-failing receiver got %d requests in all (%d attempts recorded), want 2: max-retries 1 allows one retry", n, exhaustedAttempts)
	}
	if n := len(approvals.Requests()); n != 1 {
		t.Errorf("workflow_transition receiver got %d requests, want 1: synchronous deliveries are never retried", n)
	}
}

func outageThenRecovery(t *testing.T, s *system, rc *testreceiver.Receiver) {
	const tmpl = `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}, "customer": "{{ doc.customer }}"}`
	const want = `{"name": "SO-0001", "total": 1500, "customer": "ACME Corp"}`

	var created map[string]any
	s.ok(t, &created, "homing", "webhook", "create", "--name", "orders", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", rc.URL+"/orders", "--template", tmpl, "--secret", "--json")
	secret, _ := created["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") || created["has_secret"] != true {
		t.Fatalf("webhook create --secret --json = %v", created)
	}

	var published map[string]string
	s.ok(t, &published, "enqueue", "--doctype", "Sales Order", "--event", "on_submit", "--doc-name", "SO-0001",
		"--doc", `{"name": "SO-0001", "grand_total": 1500, "customer": "ACME Corp", "status": "Paid"}`,
		"--event-id", "evt-outage", "--json")
	if published["event_id"] != "evt-outage" || len(published) != 1 {
		t.Fatalf(`enqueue --json = %v, want {"event_id": "evt-outage"}`, published)
	}

	id := s.deliveryOf(t, "evt-outage")
	d := s.waitStatus(t, id, "Delivered")

	got := rc.Requests()
	if d.Attempts < 2 || len(d.History) != d.Attempts {
		t.Errorf("delivery has %d attempts and %d history entries, want at least 2 of each", d.Attempts, len(d.History))
	}
	if len(got) != d.Attempts {
		t.Errorf("receiver got %d requests, the delivery records %d attempts", len(got), d.Attempts)
	}
	if len(got) < 2 {
		t.Fatalf("receiver got %d requests, want the failed one and the retry", len(got))
	}
	var ok2xx int
	for i, r := range got {
		if r.Status/100 == 2 {
			ok2xx++
		}
		if string(r.Body) != want {
			t.Errorf("request %d body = %q, want exactly %q", i+1, r.Body, want)
		}
		if sig := r.Header.Get("X-Frappe-Webhook-Signature"); sig != frappeSignature(secret, r.Body) {
			t.Errorf("request %d: X-Frappe-Webhook-Signature %q does not verify with the webhook's secret", i+1, sig)
		}
		if wid := r.Header.Get("webhook-id"); wid != id {
			t.Errorf("request %d: webhook-id = %q, want the delivery id %q", i+1, wid, id)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("request %d: Content-Type = %q", i+1, ct)
		}
		if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "Homing/") {
			t.Errorf("request %d: User-Agent = %q", i+1, ua)
		}
	}
	if ok2xx != 1 || got[len(got)-1].Status != http.StatusOK || got[0].Status != http.StatusServiceUnavailable {
		t.Errorf("receiver answered %v, want 503 first and exactly one 200, last", statuses(got))
	}
	if gap := got[1].At.Sub(got[0].At); gap < 900*time.Millisecond {
		t.Errorf("the retry came %s after the first attempt, want the schedule's 1s", gap)
	}

	if d.Webhook != "orders" || d.EventID != "evt-outage" || d.NextRetry != nil || d.Payload == nil || *d.Payload != want {
		t.Errorf("delivery show --json = %+v", d)
	}
	if d.LastStatusCode == nil || *d.LastStatusCode != http.StatusOK {
		t.Errorf("last_status_code = %v, want 200", d.LastStatusCode)
	}
	if c := d.History[0].StatusCode; c == nil || *c != http.StatusServiceUnavailable {
		t.Errorf("history[0].status_code = %v, want 503", c)
	}
	if c := d.History[len(d.History)-1].StatusCode; c == nil || *c != http.StatusOK {
		t.Errorf("last history status_code = %v, want 200", c)
	}
	for i, h := range d.History {
		if h.Attempt != i+1 || h.At.IsZero() || h.DurationMS == nil || h.Error == nil {
			t.Errorf("history[%d] = %+v", i, h)
		}
	}
}

func statuses(rs []testreceiver.Request) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.Status
	}
	return out
}

func exhausted(t *testing.T, s *system, rc *testreceiver.Receiver) int {
	s.ok(t, nil, "homing", "webhook", "create", "--name", "invoices", "--doctype", "Sales Invoice", "--event", "on_submit",
		"--url", rc.URL+"/invoices", "--max-retries", "1")
	s.ok(t, nil, "enqueue", "--doctype", "Sales Invoice", "--event", "on_submit", "--doc", `{"name": "SINV-1"}`, "--event-id", "evt-exhaust")

	id := s.deliveryOf(t, "evt-exhaust")
	d := s.waitStatus(t, id, "Exhausted")
	got := rc.Requests()
	if d.Attempts != 2 || len(d.History) != 2 || d.MaxRetries != 1 || d.NextRetry != nil {
		t.Errorf("exhausted delivery = %+v, want 2 attempts (max_retries 1) and no next_retry", d)
	}
	if len(got) != 2 {
		t.Errorf("receiver got %d requests, want 2", len(got))
	}
	for i, h := range d.History {
		if h.StatusCode == nil || *h.StatusCode != http.StatusInternalServerError {
			t.Errorf("history[%d].status_code = %v, want 500", i, h.StatusCode)
		}
	}
	if len(got) == 2 {
		if gap := got[1].At.Sub(got[0].At); gap < 900*time.Millisecond {
			t.Errorf("the retry came %s after the first attempt, want the schedule's 1s", gap)
		}
		if got[0].Header.Get("webhook-id") != id || got[1].Header.Get("webhook-id") != id {
			t.Errorf("webhook-id headers %q, %q, want %q", got[0].Header.Get("webhook-id"), got[1].Header.Get("webhook-id"), id)
		}
	}
	return d.Attempts
}

func workflowTransitionFailure(t *testing.T, s *system, rc *testreceiver.Receiver) {
	s.ok(t, nil, "homing", "webhook", "create", "--name", "approvals", "--doctype", "Leave Application",
		"--event", "workflow_transition", "--url", rc.URL+"/approvals")
	r := s.run(t, "enqueue", "--doctype", "Leave Application", "--event", "workflow_transition",
		"--doc", `{"name": "LA-1", "workflow_state": "Approved"}`, "--event-id", "evt-wf")
	if r.code != 1 {
		t.Fatalf("enqueue of a workflow_transition that fails: want exit 1, got %s", r)
	}
	if r.stdout != "evt-wf\n" {
		t.Errorf("stdout = %q, want the event id", r.stdout)
	}
	if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], `webhook "approvals": `) {
		t.Errorf("stderr should name the failed webhook in one line:\n%s", r.stderr)
	}
	if n := len(rc.Requests()); n != 1 {
		t.Errorf("receiver got %d requests before enqueue returned, want 1", n)
	}
	var list []delivery
	s.ok(t, &list, "homing", "delivery", "list", "--event-id", "evt-wf", "--json")
	if len(list) != 1 || list[0].Status != "Exhausted" || list[0].Webhook != "approvals" {
		t.Errorf("deliveries of evt-wf = %+v, want one Exhausted", list)
	}
}
