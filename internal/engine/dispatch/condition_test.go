package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// A condition that exceeds its budget (issue 25: 200 toJSON(split(…)) of a
// large field, which once ran 21 s and then answered false with no error)
// stops at its size limit, and its webhook's delivery is recorded Exhausted
// with the reason, where `homing delivery list` and `homing stats` show it;
// a healthy webhook on the same event still gets its delivery. The time
// limit is out of reach (README, "Limits"): the size limit, not the clock
// of a loaded machine, must stop it.
func TestFanOutRecordsAConditionOverItsBudget(t *testing.T) {
	t.Parallel()
	hostile := strings.Repeat(`len(toJSON(split(doc.big, ""))) == 3 || `, 199) + `len(toJSON(split(doc.big, ""))) == 3`
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Date(2031, 1, 2, 12, 0, 0, 0, time.UTC)
			for id, cond := range map[string]string{"healthy": `doc.name != ""`, "hostile": hostile} {
				w := models.Webhook{
					ID: id, Name: id, DocType: "Sales Invoice", DocEvent: "on_submit", RequestURL: "http://127.0.0.1:1/",
					RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
					ConditionLanguage: models.ConditionExpr, Condition: cond,
					Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
				}
				if err := db.Create(&w).Error; err != nil {
					t.Fatal(err)
				}
			}
			d := New(db, send.NewSender(send.SenderConfig{}), nil, Config{Clock: clock.NewStub(now), ConditionTimeLimit: time.Hour})
			doc, err := event.DecodeDoc([]byte(`{"name": "SINV-1", "big": "` + strings.Repeat("a", 1<<20) + `"}`))
			if err != nil {
				t.Fatal(err)
			}
			pending, err := d.FanOut(context.Background(), Event{ID: "ev1", DocType: "Sales Invoice", Event: "on_submit", Doc: doc})
			if err != nil || len(pending) != 1 || pending[0].WebhookName != "healthy" {
				t.Fatalf("fan-out = %v, %v; want the healthy webhook's delivery pending", pending, err)
			}
			var row models.Delivery
			if err := db.Where("webhook_name = ?", "hostile").First(&row).Error; err != nil {
				t.Fatalf("the hostile webhook's delivery was not recorded: %v", err)
			}
			if row.Status != models.StatusExhausted || !strings.Contains(row.LastError, "size limit") || strings.Contains(row.LastError, "time limit") {
				t.Errorf("hostile delivery %s with reason %.300q; want Exhausted at the size limit", row.Status, row.LastError)
			}
		})
	}
}
