package dispatch

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// A fan-out whose condition or body is stopped by the process's heap
// ceiling (budget.ErrOverloaded) fails, so that the event's task runs
// again later, and writes nothing: the delivery is made once the process
// has room, never Exhausted for a fault that is not the webhook's. Not
// parallel: the memory limit is the whole process's.
func TestFanOutPastTheHeapCeilingIsRetriedNotExhausted(t *testing.T) {
	ctx := context.Background()
	db := testenv.SQLite(t)
	box := testenv.SecretBox(t)
	clk := clock.NewStub(time.Now())
	hooks := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	d := New(db, send.NewSender(send.SenderConfig{}), box, Config{Clock: clk})
	doc := map[string]any{"name": "SO-1", "s": strings.Repeat("x", 1024)}
	for _, tc := range []struct{ name, language, condition, template string }{
		{"py-condition", "python", "len(doc.s * 100) > 0", ""},
		{"body-template", "expr", "", `{"a": "{{ doc.s * 100 }}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doctype, event, url := "Sales Order "+tc.name, "on_submit", "http://127.0.0.1:9/hook"
			in := webhook.Input{Name: &tc.name, DocType: &doctype, Event: &event, URL: &url, ConditionLanguage: &tc.language, Condition: &tc.condition}
			if tc.template != "" {
				in.Template = &tc.template
			}
			if _, err := hooks.Create(ctx, "", in); err != nil {
				t.Fatal(err)
			}
			ev := Event{ID: "evt-" + tc.name, DocType: doctype, Event: event, Doc: doc}

			ballast := make([]byte, 64<<20)
			for i := range ballast {
				ballast[i] = 1
			}
			old := debug.SetMemoryLimit(48 << 20)
			t.Cleanup(func() { debug.SetMemoryLimit(old) })
			_, err := d.FanOut(ctx, ev)
			debug.SetMemoryLimit(old)
			runtime.KeepAlive(ballast)
			if !errors.Is(err, budget.ErrOverloaded) || errors.Is(err, send.ErrUnbuildable) {
				t.Fatalf("fan-out past the ceiling: %v, want an error wrapping ErrOverloaded only", err)
			}
			var rows []models.Delivery
			if err := db.Where("event_id = ?", ev.ID).Find(&rows).Error; err != nil || len(rows) != 0 {
				t.Fatalf("rows after the stopped fan-out: %+v %v, want none (nothing Exhausted)", rows, err)
			}

			pending, err := d.FanOut(ctx, ev)
			if err != nil || len(pending) != 1 {
				t.Fatalf("fan-out again with room = %v, %v; want one pending delivery", pending, err)
			}
		})
	}
}
