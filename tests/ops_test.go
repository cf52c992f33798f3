package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// TestRecoverRetryResendThroughRealProcesses exhausts deliveries, then brings
// them back with the CLI while worker and scheduler run: two recover commands
// at once, a retry and a resend. The receiver must get exactly one new
// request per requeued delivery.
func TestRecoverRetryResendThroughRealProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	s := newSystem(t)
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	var mu sync.Mutex
	up := false
	rc := testreceiver.Answers(t, func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	s.ok(t, nil, "homing", "webhook", "create", "--name", "rec", "--doctype", "Invoice", "--event", "on_submit",
		"--url", rc.URL, "--max-retries", "0")
	const n = 5
	ids := make([]string, n)
	for i := range ids {
		ev := fmt.Sprintf("rec-%d", i)
		s.ok(t, nil, "enqueue", "--doctype", "Invoice", "--event", "on_submit", "--event-id", ev, "--doc", `{"name": "INV-1"}`)
		ids[i] = s.deliveryOf(t, ev)
		s.waitStatus(t, ids[i], "Exhausted")
	}
	if got := len(rc.Requests()); got != n {
		t.Fatalf("receiver got %d requests before recovery, want %d", got, n)
	}
	mu.Lock()
	up = true
	mu.Unlock()

	// retry one by ID.
	s.ok(t, nil, "homing", "delivery", "retry", ids[0])
	s.waitStatus(t, ids[0], "Delivered")

	// Two recovers at once: together they requeue the other four once.
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.run(t, "homing", "delivery", "recover", "--webhook", "rec", "--since", "1h")
		}()
	}
	wg.Wait()
	total := 0
	for _, r := range results {
		var k int
		if r.code != 0 {
			t.Fatalf("recover: %s", r)
		}
		if _, err := fmt.Sscanf(strings.TrimSpace(r.stdout), "requeued %d deliveries", &k); err != nil {
			t.Fatalf("recover summary %q", r.stdout)
		}
		total += k
	}
	if total != n-1 {
		t.Fatalf("the two recovers requeued %d in total, want %d", total, n-1)
	}
	for _, id := range ids[1:] {
		s.waitStatus(t, id, "Delivered")
	}
	// resend a Delivered one: a new, linked delivery.
	r := s.run(t, "homing", "delivery", "resend", ids[0])
	if r.code != 0 {
		t.Fatal(r)
	}
	newID := strings.TrimSpace(r.stdout)
	s.waitStatus(t, newID, "Delivered")
	s.stop()

	counts := map[string]int{}
	for _, g := range rc.Requests() {
		counts[g.Header.Get("Webhook-Id")]++
	}
	for _, id := range ids {
		if counts[id] != 2 {
			t.Errorf("delivery %s reached the receiver %d times, want 2 (the failure and one requeued attempt)", id, counts[id])
		}
	}
	if counts[newID] != 1 {
		t.Errorf("resent delivery reached the receiver %d times, want 1", counts[newID])
	}
}

// TestDevModeFromACleanDirectory runs `homing dev` in an empty directory
// (embedded Redis, SQLite file created there) and publishes with `enqueue` as
// another process.
func TestDevModeFromACleanDirectory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redisAddr := l.Addr().String()
	_ = l.Close()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOMING_") {
			env = append(env, kv)
		}
	}
	// The SQLite default is per user ($XDG_DATA_HOME/homing/homing.db), not
	// the current directory: point the data home at a directory of the
	// test's own.
	dataHome, stateHome := t.TempDir(), t.TempDir()
	env = append(env, "HOMING_METRICS_ADDR=", "HOMING_LOG_FORMAT=text", "XDG_DATA_HOME="+dataHome, "XDG_STATE_HOME="+stateHome)
	out := &syncBuffer{}
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dev := exec.Command(filepath.Join(binDir, "homing"), "dev", "--fast", "--redis-addr", redisAddr, "--monitor-addr", "", "--api-addr", apiAddr)
	dev.Dir, dev.Env, dev.Stdout, dev.Stderr = dir, env, out, out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dev.Wait() }()
	t.Cleanup(func() {
		_ = dev.Process.Kill()
		if t.Failed() {
			t.Logf("homing dev output:\n%s", out.String())
		}
	})
	eventually(t, "dev mode to start", func() (bool, string) {
		return strings.Contains(out.String(), "IN MEMORY ONLY"), out.String()
	})
	if !strings.Contains(out.String(), redisAddr) {
		t.Fatalf("dev mode does not print its Redis address %s:\n%s", redisAddr, out.String())
	}
	if !strings.Contains(out.String(), "http://"+apiAddr+"/v1/") {
		t.Fatalf("dev mode does not print its API address %s:\n%s", apiAddr, out.String())
	}
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	shell := []string{"HOMING_REDIS_URL=redis://" + redisAddr + "/0", "HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true"}
	cli := func(name string, args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		c := exec.CommandContext(ctx, filepath.Join(plainDir, name), args...)
		c.Dir = dir
		c.Env = append(append([]string(nil), env...), shell...)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, b)
		}
		return b
	}
	cli("homing", "webhook", "create", "--name", "dev", "--doctype", "Note", "--event", "after_insert", "--url", rc.URL)
	cli("enqueue", "--doctype", "Note", "--event", "after_insert", "--doc", `{"title": "hello"}`)
	eventually(t, "the receiver to get the event", func() (bool, string) {
		return len(rc.Requests()) == 1, fmt.Sprintf("%d requests", len(rc.Requests()))
	})
	if b := string(rc.Requests()[0].Body); b != `{"title":"hello"}` {
		t.Errorf("body %q", b)
	}

	// The HTTP API publishes through the outbox, which dev mode relays by
	// polling its SQLite database.
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(cli("homing", "token", "create", "--name", "dev", "--json"), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create --json: %v %+v", err, tok)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/v1/events",
		strings.NewReader(`{"id": "note-2", "doc_type": "Note", "event": "after_insert", "doc": {"title": "over http"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/events in dev mode: %s, want 202", resp.Status)
	}
	eventually(t, "the receiver to get the event published over HTTP", func() (bool, string) {
		return len(rc.Requests()) == 2, fmt.Sprintf("%d requests", len(rc.Requests()))
	})
	if b := string(rc.Requests()[1].Body); b != `{"title":"over http"}` {
		t.Errorf("body %q", b)
	}

	// Dev mode has a secrets.key, kept under the state directory and given
	// to other shells in its export line: a webhook made there with
	// --secret is signed, not stalled on "secrets.key is not set".
	key := regexp.MustCompile(`HOMING_SECRETS_KEY=(\S+)`).FindStringSubmatch(out.String())
	if key == nil {
		t.Fatalf("dev mode's export line has no HOMING_SECRETS_KEY:\n%s", out.String())
	}
	if fi, err := os.Stat(filepath.Join(stateHome, "homing", "dev-secrets.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("dev secrets.key file: %v %v, want it 0600 under XDG_STATE_HOME/homing", fi, err)
	}
	shell = append(shell, "HOMING_SECRETS_KEY="+key[1])
	signed := testreceiver.New(t)
	cli("homing", "webhook", "create", "--name", "signed", "--doctype", "Note", "--event", "on_update", "--url", signed.URL,
		"--secret", "whsec_"+strings.Repeat("A", 43)+"=")
	cli("enqueue", "--doctype", "Note", "--event", "on_update", "--doc", `{"title": "signed"}`)
	eventually(t, "the signed webhook's receiver to get the event", func() (bool, string) {
		return len(signed.Requests()) == 1, fmt.Sprintf("%d requests", len(signed.Requests()))
	})
	if got := signed.Requests()[0].Header.Get("Webhook-Signature"); !strings.HasPrefix(got, "v1,") {
		t.Errorf("signed webhook's request has webhook-signature %q", got)
	}
	if _, err := os.Stat(filepath.Join(dataHome, "homing", "homing.db")); err != nil {
		t.Errorf("dev mode did not use the per-user SQLite default: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "homing.db")); err == nil {
		t.Errorf("dev mode wrote homing.db into its working directory")
	}
	if !strings.Contains(out.String(), "sqlite://"+filepath.Join(dataHome, "homing", "homing.db")) {
		t.Errorf("dev mode did not print the database it uses")
	}
	_ = dev.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("homing dev exit: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Error("homing dev did not stop on SIGTERM")
	}
}
