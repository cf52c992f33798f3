package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/wiring/cli"
	"github.com/homingdev/homing/tasks"
)

func (s *site) enqueue(args ...string) result {
	s.t.Helper()
	var out, errb bytes.Buffer
	code := cli.Enqueue(append(slices.Clone(args), "--config", s.config), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func TestEnqueueUsageErrors(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--doctype", "Sales Order", "--event", "on_submit"}, []string{`"doc"`}},
		{[]string{"--event", "on_submit", "--doc", "{}"}, []string{`"doctype"`}},
		{[]string{"--doctype", "Sales Order", "--event", "on_submit", "--doc", "not json"}, []string{"--doc", "not valid JSON"}},
		{[]string{"--doctype", "Sales Order", "--event", "on_submit", "--doc", "[1, 2]"}, []string{"--doc", "JSON object"}},
		{[]string{"--doctype", "Sales Order", "--event", "on_submit", "--doc", "{}", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"--doctype", "Sales Order", "--event", "on_submit", "--doc", "{}", "--priority", "1"}, []string{"unknown flag: --priority"}},
	} {
		r := s.enqueue(tc.args...)
		checkError(t, r, 2, "enqueue: ", append(tc.want, "enqueue --help")...)
		if r.stdout != "" {
			t.Errorf("stdout = %q", r.stdout)
		}
	}
}

func TestEnqueueRefusesInvalidEvents(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	r := s.enqueue("--doctype", "Sales Order", "--event", "on_save", "--doc", `{"name": "SO-1"}`)
	checkError(t, r, 1, "enqueue: ", `"on_save"`, "on_submit", "workflow_transition")
	r = s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc", "@"+filepath.Join(t.TempDir(), "missing.json"))
	checkError(t, r, 1, "enqueue: ", "missing.json", "no such file")
}

func TestEnqueueQueuesTheEvent(t *testing.T) {
	t.Parallel()
	opt, _ := testenv.Redis(t)
	s := newSite(t, "redis:\n  url: \""+testenv.RedisURL(opt)+"\"\n")
	inspector := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = inspector.Close() })

	doc := filepath.Join(t.TempDir(), "so.json")
	if err := os.WriteFile(doc, []byte(`{"name": "SO-1", "grand_total": 1500}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc", "@"+doc, "--doc-name", "SO-1", "--event-id", "evt-1", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("enqueue: %s", r)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 || out["event_id"] != "evt-1" {
		t.Fatalf(`stdout = %q, want {"event_id": "evt-1"}`, r.stdout)
	}
	info, err := inspector.GetTaskInfo(tasks.DefaultQueue, event.TaskID("", "evt-1"))
	if err != nil {
		t.Fatalf("the event task is not in Redis: %v", err)
	}
	var p event.Payload
	if err := json.Unmarshal(info.Payload, &p); err != nil || p.DocType != "Sales Order" || p.DocName != "SO-1" ||
		p.Event != "on_submit" || string(p.Doc) != `{"grand_total":1500,"name":"SO-1"}` {
		t.Errorf("queued payload = %s", info.Payload)
	}

	// Without --event-id a UUID is made up and printed bare.
	r = s.enqueue("--doctype", "Sales Order", "--event", "on_update", "--doc", `{"name": "SO-2"}`)
	id := strings.TrimSuffix(r.stdout, "\n")
	if r.code != 0 || r.stderr != "" || uuid.Validate(id) != nil {
		t.Fatalf("enqueue without --event-id: %s", r)
	}
	if _, err := inspector.GetTaskInfo(tasks.DefaultQueue, event.TaskID("", id)); err != nil {
		t.Errorf("event %s is not in Redis: %v", id, err)
	}
	// The same event ID again is accepted and queued once.
	r = s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc", "@"+doc, "--event-id", "evt-1")
	if r.code != 0 || r.stdout != "evt-1\n" {
		t.Errorf("repeated enqueue: %s", r)
	}
	if n, err := inspector.ListPendingTasks(tasks.DefaultQueue); err != nil || len(n) != 2 {
		t.Errorf("%d pending tasks (%v), want 2", len(n), err)
	}
}

func TestEnqueueWorkflowTransitionNamesFailedWebhooks(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	var (
		mu     sync.Mutex
		bodies []string
	)
	receiver := func(status int) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			w.WriteHeader(status)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	down, up := receiver(http.StatusInternalServerError), receiver(http.StatusOK)
	for name, url := range map[string]string{"approvals-down": down.URL, "approvals-up": up.URL} {
		s.ok("webhook", "create", "--name", name, "--doctype", "Leave Application", "--event", "workflow_transition", "--url", url)
	}

	r := s.enqueue("--doctype", "Leave Application", "--event", "workflow_transition", "--doc", `{"name": "LA-1", "workflow_state": "Approved"}`, "--event-id", "wf-1")
	if r.code != 1 {
		t.Fatalf("want exit 1, got %s", r)
	}
	if r.stdout != "wf-1\n" {
		t.Errorf("stdout = %q, want the event id", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `webhook "approvals-down": `) || !strings.Contains(lines[0], "500") {
		t.Errorf("stderr should name the failed webhook, and only it:\n%s", r.stderr)
	}
	mu.Lock()
	if len(bodies) != 2 {
		t.Errorf("receivers got %d requests, want one each", len(bodies))
	}
	mu.Unlock()

	list := array(t, s.ok("delivery", "list", "--event-id", "wf-1", "--json").stdout)
	statuses := map[string]any{}
	for _, d := range list {
		statuses[d["webhook"].(string)] = d["status"]
	}
	if statuses["approvals-down"] != "Exhausted" || statuses["approvals-up"] != "Delivered" || len(statuses) != 2 {
		t.Errorf("statuses = %v", statuses)
	}

	// All delivered: exit 0.
	s.ok("webhook", "disable", "approvals-down")
	r = s.enqueue("--doctype", "Leave Application", "--event", "workflow_transition", "--doc", `{"name": "LA-2"}`, "--json")
	if r.code != 0 || r.stderr != "" {
		t.Errorf("enqueue to a working receiver: %s", r)
	}
}

func TestRunCommandsUsage(t *testing.T) {
	t.Parallel()
	for name, run := range map[string]func([]string, io.Writer, io.Writer) int{"worker": cli.Worker, "scheduler": cli.Scheduler} {
		var out, errb bytes.Buffer
		if code := run([]string{"now"}, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), name+`: unexpected argument "now"`) {
			t.Errorf("%s now: exit %d, stderr %q", name, code, errb.String())
		}
		errb.Reset()
		if code := run([]string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "none.yaml") {
			t.Errorf("%s with a missing config: exit %d, stderr %q", name, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%s printed %q", name, out.String())
		}
	}
}

// With Redis down, enqueue says so in one plain line with the fix, not
// asynq's "UNKNOWN: redis command error: SADD failed".
func TestEnqueueSaysRedisIsNotReachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	s := newSite(t, fmt.Sprintf("redis:\n  url: redis://%s/0\n", addr))
	r := s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc", `{"name": "SO-1"}`)
	checkError(t, r, 1, "enqueue: ", "redis at "+addr+" is not reachable: connection refused; start it or set HOMING_REDIS_URL")
	if strings.Contains(r.stderr, "UNKNOWN") || strings.Contains(r.stderr, "SADD") {
		t.Errorf("stderr %q still carries asynq's internals", r.stderr)
	}
}
