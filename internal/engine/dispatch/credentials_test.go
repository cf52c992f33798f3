package dispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// A credential header is not frozen into the delivery: the retry after an
// operator changed it carries the new value, and neither the row nor the
// attempt history holds it in the clear.
func TestRetryTakesCredentialsFromTheWebhookAsItIsNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	box := testenv.SecretBox(t)
	var (
		mu   sync.Mutex
		auth []string
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auth = append(auth, r.Header.Get("Authorization"))
		if len(auth) == 1 {
			w.WriteHeader(http.StatusInternalServerError) // the first attempt fails
		}
	}))
	t.Cleanup(rc.Close)

	clk := clock.NewStub(time.Now())
	hooks := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	name, doctype, event, url := "keyed", "Sales Order", "on_submit", rc.URL
	one := []string{"Authorization: Bearer one"}
	if _, err := hooks.Create(ctx, "", webhook.Input{Name: &name, DocType: &doctype, Event: &event, URL: &url, Headers: &one}); err != nil {
		t.Fatal(err)
	}
	d := New(db, send.NewSender(send.SenderConfig{}), box, Config{Clock: clk})
	pending, err := d.FanOut(ctx, Event{ID: "evt-keyed", DocType: doctype, Event: event, Doc: map[string]any{"name": "SO-1"}})
	if err != nil || len(pending) != 1 {
		t.Fatalf("FanOut = %v, %v; want one pending delivery", pending, err)
	}
	id := pending[0].ID
	if out, err := d.Attempt(ctx, id, First); err != nil || out.Status != models.StatusFailed {
		t.Fatalf("first attempt = %+v, %v; want Failed", out, err)
	}

	two := []string{"Authorization: Bearer two"}
	if _, err := hooks.Update(ctx, "", name, webhook.Input{Headers: &two}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if out, err := d.Attempt(ctx, id, Retry); err != nil || out.Status != models.StatusDelivered {
		t.Fatalf("retry = %+v, %v; want Delivered", out, err)
	}
	mu.Lock()
	got := append([]string(nil), auth...)
	mu.Unlock()
	if len(got) != 2 || got[0] != "Bearer one" || got[1] != "Bearer two" {
		t.Errorf("receiver got Authorization %q, want the key of each moment: [Bearer one, Bearer two]", got)
	}

	var row models.Delivery
	if err := db.Where("id = ?", id).Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	if _, ok := row.Headers["Authorization"]; ok {
		t.Errorf("delivery row holds Authorization: %v", row.Headers)
	}
	var attempts []models.Attempt
	if err := db.Where("delivery_id = ?", id).Order("attempt").Find(&attempts).Error; err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempts recorded, want 2", len(attempts))
	}
	for _, a := range attempts {
		if v := a.RequestHeaders["Authorization"]; v != send.Masked {
			t.Errorf("attempt %d recorded Authorization %q, want %q", a.Attempt, v, send.Masked)
		}
	}
}
