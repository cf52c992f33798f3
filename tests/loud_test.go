package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// TestStallsAreLoud: a worker started without secrets.key while signed
// webhooks exist warns at start and logs an ERROR naming each delivery it
// cannot send, whose last_error and homing stats say why; a webhook on a
// queue no worker serves is warned about when it is created, by the
// worker at start, and in homing stats. Then a worker with the key sends
// what was stuck.
func TestStallsAreLoud(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	s := newSystem(t)
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	s.ok(t, nil, "homing", "webhook", "create", "--name", "signed", "--doctype", "Order", "--event", "on_submit",
		"--url", rc.URL, "--secret", "a-signing-secret-0123456789")
	r := s.run(t, "homing", "webhook", "create", "--name", "lonely", "--doctype", "Order", "--event", "on_cancel",
		"--url", rc.URL, "--queue", "nobody-serves-this")
	if r.code != 0 || !strings.Contains(r.stderr, `warning: queue "nobody-serves-this" of webhook lonely is served by no running worker`) {
		t.Errorf("webhook create --queue nobody-serves-this: %s", r)
	}

	key := s.envValue("HOMING_SECRETS_KEY")
	keyless := *s
	keyless.env = withEnv(s.env, "HOMING_SECRETS_KEY", "")
	keyless.env = withEnv(keyless.env, "HOMING_WORKR_CONCURRENCY", "4") // mistyped on purpose
	w := keyless.start("worker", "worker started")
	eventually(t, "the worker's start-up warnings", func() (bool, string) {
		out := w.output.String()
		return strings.Contains(out, "secrets.key is not set") && strings.Contains(out, `queue \"nobody-serves-this\"`) &&
			strings.Contains(out, "did you mean HOMING_WORKER_CONCURRENCY"), out
	})

	c := s.publisher(t)
	ids := []string{"stuck-1", "stuck-2"}
	for _, id := range ids {
		if _, err := c.Publish(context.Background(), client.Event{ID: id, DocType: "Order", DocName: id, Event: "on_submit", Doc: map[string]any{"name": id}}); err != nil {
			t.Fatal(err)
		}
	}
	var deliveryIDs []string
	for _, id := range ids {
		deliveryIDs = append(deliveryIDs, s.deliveryOf(t, id))
	}
	eventually(t, "an ERROR line naming each stuck delivery", func() (bool, string) {
		out := w.output.String()
		for _, id := range deliveryIDs {
			if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "delivery_id="+id) || !strings.Contains(out, "reason=secret") {
				return false, out
			}
		}
		return true, ""
	})
	for _, id := range deliveryIDs {
		var d struct {
			Status    string `json:"status"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		}
		s.ok(t, &d, "homing", "delivery", "show", id, "--json")
		if d.Status != models.StatusFailed || d.Attempts != 0 || !strings.HasPrefix(d.LastError, "not sent: ") || !strings.Contains(d.LastError, "secrets.key") {
			t.Errorf("stuck delivery %s: %+v, want Failed, 0 attempts, last_error naming secrets.key", id, d)
		}
	}
	stats := s.run(t, "homing", "stats")
	if !strings.Contains(stats.stdout, "STUCK 2 deliveries of webhook signed: not sent: ") ||
		!strings.Contains(stats.stdout, `WARNING unserved_queue: queue "nobody-serves-this" of webhook lonely`) {
		t.Errorf("homing stats does not show the stuck deliveries and the unserved queue:\n%s", stats)
	}
	if len(rc.Requests()) != 0 {
		t.Fatalf("the receiver got %d requests from a worker without secrets.key", len(rc.Requests()))
	}

	// The key comes back: the sweeper's retries send what was stuck.
	w.terminate(t)
	s.env = withEnv(s.env, "HOMING_SECRETS_KEY", key)
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	eventually(t, "the stuck deliveries sent once the key is back", func() (bool, string) {
		got := okByID(rc.Requests())
		return got[deliveryIDs[0]] == 1 && got[deliveryIDs[1]] == 1, fmt.Sprint(got)
	})
	s.stop()
}
