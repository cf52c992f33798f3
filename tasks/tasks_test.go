package tasks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/tasks"
)

// A webhook cannot use Homing's own queue: its slow receivers would hold
// up the sweeps and retention that every tenant's retries wait on (red
// team, issue 25).
func TestWebhooksCannotUseTheSystemQueue(t *testing.T) {
	t.Parallel()
	if !strings.HasPrefix(tasks.SystemQueue, webhook.ReservedQueuePrefix) {
		t.Fatalf("tasks.SystemQueue %q does not start with webhook.ReservedQueuePrefix %q", tasks.SystemQueue, webhook.ReservedQueuePrefix)
	}
	hooks := webhook.New(testenv.SQLite(t), testenv.SecretBox(t), clock.NewStub(time.Now()), webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	name, doctype, event, url := "tarpit", "D", "on_update", "http://127.0.0.1:9/hook"
	for _, q := range []string{tasks.SystemQueue, "homing_other"} {
		_, err := hooks.Create(context.Background(), "", webhook.Input{Name: &name, DocType: &doctype, Event: &event, URL: &url, Queue: &q})
		var fe *webhook.FieldError
		if !errors.As(err, &fe) || fe.Field != "queue" || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("queue %q: %v, want a refusal of the reserved queue", q, err)
		}
	}
	other := "slow_receivers"
	if _, err := hooks.Create(context.Background(), "", webhook.Input{Name: &name, DocType: &doctype, Event: &event, URL: &url, Queue: &other}); err != nil {
		t.Errorf("queue %q: %v", other, err)
	}
}
