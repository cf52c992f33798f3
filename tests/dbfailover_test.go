package tests

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestServeDuringADatabaseOutage runs a real `homing serve` whose
// PostgreSQL is behind a proxy the test cuts, as a failed primary's host
// is (issue 28): publishes are answered 503 database_unavailable with
// Retry-After, never 500 and never 202; /readyz is 503; the log has one
// ERROR line for the whole outage; and once the proxy is back the same
// event ID is accepted with 202 and one INFO line says the database is
// available again, without a restart.
func TestServeDuringADatabaseOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	s := newSystem(t)
	proxy, viaProxy := testenv.PostgresProxy(t, envValue(s.env, "HOMING_DATABASE_URL"))
	s.env = withEnv(s.env, "HOMING_DATABASE_URL", viaProxy)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_LOG_LEVEL", "info")
	c := s.startAPI(t)
	serve := s.procs[len(s.procs)-1]

	publish := func(id string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("POST", c.base+"/v1/events", strings.NewReader(
			fmt.Sprintf(`{"id": %q, "doc_type": "Order", "event": "on_submit", "doc": {"name": "O-1"}}`, id)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(c.base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _, body := publish("before"); code != http.StatusAccepted {
		t.Fatalf("publish before the cut: %d %s", code, body)
	}

	proxy.Cut()
	for i := range 5 {
		code, retryAfter, body := publish(fmt.Sprintf("during-%d", i))
		if code != http.StatusServiceUnavailable || retryAfter != "2" || !strings.Contains(body, `"code":"database_unavailable"`) {
			t.Fatalf("publish during the cut: %d Retry-After %q %s; want 503 database_unavailable with Retry-After: 2", code, retryAfter, body)
		}
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "database unavailable") {
		t.Errorf("/readyz during the cut: %d %s; want 503 naming the database", code, body)
	}

	proxy.Restore()
	var code int
	var body string
	eventually(t, "a publish accepted after the restore", func() (bool, string) {
		code, _, body = publish("during-0")
		return code != http.StatusServiceUnavailable, body
	})
	if code != http.StatusAccepted {
		t.Fatalf("the event refused during the cut, published again: %d %s; want 202", code, body)
	}
	eventually(t, "the INFO line that the database is back", func() (bool, string) {
		return strings.Contains(serve.output.String(), `level=INFO msg="database available again after `), serve.output.String()
	})
	out := serve.output.String()
	if n := strings.Count(out, "level=ERROR"); n != 1 || !strings.Contains(out, `level=ERROR msg="database unavailable: `) {
		t.Errorf("want exactly one ERROR line, the outage's; got %d:\n%s", n, out)
	}
	if !strings.Contains(out, "publishes included, are answered 503") {
		t.Errorf("the ERROR line does not say what serve does meanwhile:\n%s", out)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Errorf("/readyz after the restore: %d %s", code, body)
	}
	s.stop()
}
