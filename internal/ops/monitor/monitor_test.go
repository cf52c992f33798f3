package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/ops/monitor"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/tasks"
)

func TestFormatPayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, typ, in, want string
	}{
		{
			name: "delivery payload is indented in its own key order",
			typ:  tasks.TypeRetry,
			in:   `{"delivery_id":"0190-abc","webhook":"orders"}`,
			want: "{\n  \"delivery_id\": \"0190-abc\",\n  \"webhook\": \"orders\"\n}",
		},
		{
			name: "sweep payload",
			typ:  tasks.TypeSweep,
			in:   `{}`,
			want: "{}",
		},
		{
			name: "credentials are redacted at any depth, numbers keep their digits",
			typ:  tasks.TypeEvent,
			in: `{"id":"ev-1","doc":{"grand_total":1500.50,"api_token":"t0k","Client_Secret":{"a":1},` +
				`"lines":[{"X-Api-Key":"k","qty":12345678901234567890}],"password":null,"tokenless":false}}`,
			want: `{
  "id": "ev-1",
  "doc": {
    "grand_total": 1500.50,
    "api_token": "[redacted]",
    "Client_Secret": "[redacted]",
    "lines": [
      {
        "X-Api-Key": "[redacted]",
        "qty": 12345678901234567890
      }
    ],
    "password": "[redacted]",
    "tokenless": "[redacted]"
  }
}`,
		},
		{
			name: "text that is not JSON is shown as is",
			typ:  "other:task",
			in:   "hello world",
			want: "hello world",
		},
		{
			name: "JSON followed by garbage is not reformatted",
			typ:  tasks.TypeDeliver,
			in:   `{"delivery_id":"x"} trailing`,
			want: `{"delivery_id":"x"} trailing`,
		},
		{
			name: "binary is not printed",
			typ:  "other:task",
			in:   "\x00\x01\x02",
			want: "non-printable bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := monitor.FormatPayload(tt.typ, []byte(tt.in)); got != tt.want {
				t.Errorf("FormatPayload(%s)\n got: %s\nwant: %s", tt.in, got, tt.want)
			}
		})
	}
}

// queued puts one fan-out task, whose document carries a token, in the
// default queue of a private Redis index.
func queued(t *testing.T) (asynq.RedisClientOpt, *asynq.TaskInfo) {
	t.Helper()
	opt, _ := testenv.Redis(t)
	task, err := event.NewTaskJSON(event.Event{ID: "ev-monitor", DocType: "Sales Order", DocName: "SO-1", Event: "on_submit"},
		[]byte(`{"name": "SO-1", "api_token": "tok-s3cr3t"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := asynq.NewClient(opt)
	defer func() { _ = c.Close() }()
	info, err := c.Enqueue(task)
	if err != nil {
		t.Fatal(err)
	}
	return opt, info
}

func start(t *testing.T, opt asynq.RedisConnOpt, readOnly bool) string {
	t.Helper()
	srv := monitor.NewServer("127.0.0.1:0", opt, readOnly, config.MonitorAuth{}, nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if strings.HasSuffix(srv.Addr(), ":0") {
		t.Fatalf("Addr %q is not the bound address", srv.Addr())
	}
	return "http://" + srv.Addr()
}

func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestReadOnlyMonitor(t *testing.T) {
	t.Parallel()
	opt, info := queued(t)
	base := start(t, opt, true)

	code, body := do(t, http.MethodGet, base+"/")
	if code != http.StatusOK || !strings.Contains(body, "<title>Asynq - Monitoring</title>") {
		t.Fatalf("GET /: %d, %.200q", code, body)
	}
	if !strings.Contains(body, `window.FLAG_READ_ONLY="true"`) {
		t.Error("the page does not tell the UI it is read-only, so it shows buttons that will fail")
	}
	script := regexp.MustCompile(`src="(/static/js/main\.[0-9a-f]+\.chunk\.js)"`).FindStringSubmatch(body)
	if script == nil {
		t.Fatalf("GET /: no main script in %.500q", body)
	}
	if code, js := do(t, http.MethodGet, base+script[1]); code != http.StatusOK || strings.Contains(js, "<title>") {
		t.Errorf("GET %s: %d, %.100q; want the script", script[1], code, js)
	}

	code, body = do(t, http.MethodGet, base+"/api/queues/default/pending_tasks")
	if code != http.StatusOK {
		t.Fatalf("pending tasks: %d %s", code, body)
	}
	if strings.Contains(body, "tok-s3cr3t") {
		t.Errorf("the API shows the document's token: %s", body)
	}
	var list struct {
		Tasks []struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Payload string `json:"payload"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(list.Tasks) != 1 || list.Tasks[0].ID != info.ID || list.Tasks[0].Type != tasks.TypeEvent {
		t.Fatalf("pending tasks %+v, want the one queued (%s)", list.Tasks, info.ID)
	}
	if got, want := list.Tasks[0].Payload, monitor.FormatPayload(tasks.TypeEvent, info.Payload); got != want {
		t.Errorf("payload shown\n%s\nwant\n%s", got, want)
	}
	if p := list.Tasks[0].Payload; !strings.Contains(p, "\n  \"doc_type\": \"Sales Order\",\n") || !strings.Contains(p, `"api_token": "[redacted]"`) {
		t.Errorf("payload is not pretty and redacted:\n%s", p)
	}

	for _, m := range []struct{ method, path string }{
		{http.MethodDelete, "/api/queues/default/pending_tasks/" + info.ID},
		{http.MethodPost, "/api/queues/default/pending_tasks/" + info.ID + ":archive"},
		{http.MethodPost, "/api/queues/default:pause"},
		{http.MethodDelete, "/api/queues/default"},
	} {
		if code, body := do(t, m.method, base+m.path); code != http.StatusMethodNotAllowed || !strings.Contains(body, "read-only") {
			t.Errorf("%s %s in read-only mode: %d %q, want 405", m.method, m.path, code, body)
		}
	}
	insp := asynq.NewInspector(opt)
	defer func() { _ = insp.Close() }()
	got, err := insp.GetTaskInfo("default", info.ID)
	if err != nil || got.State != asynq.TaskStatePending {
		t.Errorf("after the refused requests the task is %v (%v), want still pending", got, err)
	}
	if q, err := insp.GetQueueInfo("default"); err != nil || q.Paused {
		t.Errorf("queue after a refused pause: %+v, %v", q, err)
	}
}

func TestReadWriteMonitorDeletes(t *testing.T) {
	t.Parallel()
	opt, info := queued(t)
	base := start(t, opt, false)
	if code, body := do(t, http.MethodDelete, base+"/api/queues/default/pending_tasks/"+info.ID); code != http.StatusNoContent {
		t.Fatalf("DELETE in read-write mode: %d %q", code, body)
	}
	insp := asynq.NewInspector(opt)
	defer func() { _ = insp.Close() }()
	if _, err := insp.GetTaskInfo("default", info.ID); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("task after DELETE: %v, want not found", err)
	}
}

// TestReadWriteMonitorRefusesCrossSiteWrites: with --read-write and basic
// auth the browser sends the credentials by itself, so a form on another
// site could archive every pending task. A write the browser marks as
// cross-site (Sec-Fetch-Site, or an Origin that is not the monitor's) is
// refused with 403 by the console's rule; the monitor's own pages still
// act, and reads are never refused.
func TestReadWriteMonitorRefusesCrossSiteWrites(t *testing.T) {
	t.Parallel()
	opt, info := queued(t)
	auth, err := config.ParseMonitorAuth("basic:ops:secret")
	if err != nil {
		t.Fatal(err)
	}
	srv := monitor.NewServer("127.0.0.1:0", opt, false, auth, nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	base := "http://" + srv.Addr()
	send := func(method, path string, headers map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("ops", "secret")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	archiveAll := "/api/queues/default/pending_tasks:archive_all"
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "https://evil.example"},
		{"Origin": "null"},
	} {
		if code, body := send(http.MethodPost, archiveAll, h); code != http.StatusForbidden || !strings.Contains(body, "refused") {
			t.Errorf("cross-site POST %s with %v: %d %q, want 403 saying it was refused", archiveAll, h, code, body)
		}
	}
	insp := asynq.NewInspector(opt)
	defer func() { _ = insp.Close() }()
	if got, err := insp.GetTaskInfo("default", info.ID); err != nil || got.State != asynq.TaskStatePending {
		t.Fatalf("after the refused cross-site writes the task is %v (%v), want still pending", got, err)
	}
	if code, body := send(http.MethodGet, "/api/queues/default/pending_tasks", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusOK {
		t.Errorf("a cross-site read: %d %q, want 200", code, body)
	}
	if code, body := send(http.MethodPost, archiveAll, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": base}); code != http.StatusOK || !strings.Contains(body, `"archived":1`) {
		t.Fatalf("the monitor's own archive_all: %d %q, want 200 archiving the one task", code, body)
	}
}
