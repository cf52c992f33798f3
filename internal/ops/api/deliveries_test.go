package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/homingdev/homing/models"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// deliveryKeys are the fields of `homing delivery list --json`.
var deliveryKeys = []string{
	"id", "webhook", "event_id", "doc_type", "doc_name", "doc_event", "status", "attempts", "max_retries",
	"next_retry", "method", "url", "last_status_code", "last_error", "created_at", "updated_at",
}

// detailKeys are the fields of `homing delivery show --json`.
var detailKeys = append(slices.Clone(deliveryKeys), "headers", "payload", "last_response", "history")

// addDelivery stores a delivery of webhook in status, created at at.
func (s *server) addDelivery(webhook, status string, at time.Time) models.Delivery {
	s.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	d := models.Delivery{
		ID: id, WebhookID: "w-" + webhook, WebhookName: webhook, EventID: "ev-" + id, DocType: "Note", DocName: "N-1",
		DocEvent: "on_update", Method: "POST", URL: "https://example.com/" + webhook, Headers: models.StringMap{"X-A": "1"},
		Payload: []byte(`{"n":1}`), Status: status, Attempts: 1, MaxRetries: 0, CreatedAt: at, UpdatedAt: at,
	}
	if status == models.StatusFailed {
		next := at.Add(time.Hour)
		d.NextRetry = &next
	}
	if err := s.db.Create(&d).Error; err != nil {
		s.t.Fatal(err)
	}
	code := 500
	if status == models.StatusDelivered {
		code = 200
	}
	if err := s.db.Create(&models.Attempt{DeliveryID: id, Attempt: 1, At: at, Method: "POST", URL: d.URL, StatusCode: &code, Class: fmt.Sprintf("%dxx", code/100)}).Error; err != nil {
		s.t.Fatal(err)
	}
	return d
}

type page struct {
	Deliveries []map[string]any `json:"deliveries"`
	NextCursor *string          `json:"next_cursor"`
}

func (s *server) page(query string) page {
	s.t.Helper()
	r := s.expect(http.StatusOK, "GET", "/v1/deliveries"+query, s.admin, "")
	var p page
	if err := json.Unmarshal(r.body, &p); err != nil || p.Deliveries == nil {
		s.t.Fatalf("GET /v1/deliveries%s = %s, want {deliveries: [...], next_cursor}", query, r.body)
	}
	if m := r.object(s.t); len(m) != 2 {
		s.t.Errorf("page keys %v, want deliveries and next_cursor", keys(m))
	}
	return p
}

// TestDeliveryPagination walks every page: each delivery once, newest first,
// with the filters applied on every page.
func TestDeliveryPagination(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var want []string
	for i := range 7 {
		at := t0.Add(time.Duration(i/2) * time.Second) // pairs share a created_at
		want = append(want, s.addDelivery("orders", models.StatusExhausted, at).ID)
		s.addDelivery("orders", models.StatusDelivered, at)
		s.addDelivery("invoices", models.StatusExhausted, at)
	}
	slices.Reverse(want)

	var got []string
	query := "?webhook=orders&status=exhausted&limit=3"
	for pages := 1; ; pages++ {
		p := s.page(query)
		for _, d := range p.Deliveries {
			if d["webhook"] != "orders" || d["status"] != "Exhausted" {
				t.Errorf("filtered page holds %v", d)
			}
			got = append(got, d["id"].(string))
		}
		if p.NextCursor == nil {
			if pages != 3 {
				t.Errorf("%d pages, want 3 (3 + 3 + 1)", pages)
			}
			break
		}
		if pages > 3 {
			t.Fatal("the listing does not end")
		}
		query = "?webhook=orders&status=Exhausted&limit=3&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged\n got %v\nwant %v", got, want)
	}

	all := s.page("")
	if len(all.Deliveries) != 21 || all.NextCursor != nil {
		t.Errorf("default page: %d deliveries, cursor %v; want all 21 (limit 50) and no cursor", len(all.Deliveries), all.NextCursor)
	}
	item := all.Deliveries[0]
	if got := keys(item); !slices.Equal(got, slices.Sorted(slices.Values(deliveryKeys))) {
		t.Errorf("item keys\n got %v\nwant %v", got, slices.Sorted(slices.Values(deliveryKeys)))
	}
	one := s.page("?event_id=" + url.QueryEscape(want[0]))
	if len(one.Deliveries) != 0 {
		t.Errorf("event_id filter with a delivery ID matched %d", len(one.Deliveries))
	}
	ev := s.page("?event_id=ev-" + want[0])
	if len(ev.Deliveries) != 1 || ev.Deliveries[0]["id"] != want[0] {
		t.Errorf("event_id filter = %v", ev.Deliveries)
	}
	if p := s.page("?limit=500"); len(p.Deliveries) != 21 {
		t.Errorf("limit 500 = %d deliveries", len(p.Deliveries))
	}

	for _, tc := range []struct{ query, field string }{
		{"?status=Pending", "status"},
		{"?limit=0", "limit"},
		{"?limit=501", "limit"},
		{"?limit=ten", "limit"},
		{"?cursor=not-a-cursor", "cursor"},
		{"?stauts=Failed", "stauts"},
		{"?status=Failed&status=Delivered", "status"},
	} {
		s.refused(http.StatusUnprocessableEntity, "invalid_request", tc.field, "GET", "/v1/deliveries"+tc.query, s.admin, "")
	}
}

func TestDeliveryShowRetryResend(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	// The webhook exists, so retry renews the budget from its max_retries.
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{"name": "orders", "doctype": "Note", "event": "on_update", "url": "https://example.com/orders", "max_retries": 2}`)
	var hook models.Webhook
	if err := s.db.Where("name = ?", "orders").Take(&hook).Error; err != nil {
		t.Fatal(err)
	}
	exhausted := s.addDelivery("orders", models.StatusExhausted, t0)
	if err := s.db.Model(&models.Delivery{}).Where("id = ?", exhausted.ID).Update("webhook_id", hook.ID).Error; err != nil {
		t.Fatal(err)
	}
	delivered := s.addDelivery("orders", models.StatusDelivered, t0)

	d := s.expect(http.StatusOK, "GET", "/v1/deliveries/"+exhausted.ID, s.admin, "").object(t)
	if got := keys(d); !slices.Equal(got, slices.Sorted(slices.Values(detailKeys))) {
		t.Errorf("detail keys\n got %v\nwant %v", got, slices.Sorted(slices.Values(detailKeys)))
	}
	if h, _ := d["history"].([]any); len(h) != 1 || d["payload"] != `{"n":1}` || d["status"] != "Exhausted" {
		t.Errorf("detail = %v", d)
	}
	e := s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/deliveries/nope", s.admin, "")
	if !strings.Contains(e.Message, `"nope"`) {
		t.Errorf("404 message %q does not name the id", e.Message)
	}

	// retry: Failed and due, budget renewed; asking twice is harmless.
	for range 2 {
		r := s.expect(http.StatusOK, "POST", "/v1/deliveries/"+exhausted.ID+"/retry", s.admin, "").object(t)
		if r["status"] != "Failed" || r["next_retry"] == nil || r["max_retries"] != float64(1+2) || r["id"] != exhausted.ID {
			t.Errorf("after retry: %v", r)
		}
	}
	var n int64
	s.db.Model(&models.Delivery{}).Count(&n)
	if n != 2 {
		t.Errorf("retry made new rows: %d deliveries", n)
	}
	e = s.refused(http.StatusConflict, "conflict", "", "POST", "/v1/deliveries/"+delivered.ID+"/retry", s.admin, "")
	if !strings.Contains(e.Message, "/resend") {
		t.Errorf("retry of a Delivered delivery: %q should point at resend", e.Message)
	}
	s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/deliveries/nope/retry", s.admin, "")

	// A delivery never built: built from the document it kept, or refused
	// with why when it kept none (issue 25).
	unbuilt := func(doc *string) models.Delivery {
		d := s.addDelivery("orders", models.StatusExhausted, t0)
		if err := s.db.Model(&models.Delivery{}).Where("id = ?", d.ID).
			Updates(map[string]any{"webhook_id": hook.ID, "payload": []byte{}, "url_doc": doc}).Error; err != nil {
			t.Fatal(err)
		}
		return d
	}
	e = s.refused(http.StatusConflict, "conflict", "", "POST", "/v1/deliveries/"+unbuilt(nil).ID+"/retry", s.admin, "")
	if !strings.Contains(e.Message, "never built") || !strings.Contains(e.Message, "no document") {
		t.Errorf("retry of a delivery never built and without its document: %q", e.Message)
	}
	kept := `{"name": "N-1"}`
	if r := s.expect(http.StatusOK, "POST", "/v1/deliveries/"+unbuilt(&kept).ID+"/retry", s.admin, "").object(t); r["status"] != "Failed" || r["payload"] != `{"name":"N-1"}` {
		t.Errorf("retry of a delivery never built, with its document: %v", r)
	}
	s.db.Where("url_doc IS NOT NULL OR length(payload) = 0").Delete(&models.Delivery{})

	// resend: a new delivery, linked; with a key, once however often asked.
	r := s.expect(http.StatusCreated, "POST", "/v1/deliveries/"+delivered.ID+"/resend", s.admin, "")
	first := r.object(t)
	if loc := r.header.Get("Location"); loc != "/v1/deliveries/"+first["id"].(string) {
		t.Errorf("Location %q, id %v", loc, first["id"])
	}
	if first["resent_from"] != delivered.ID || first["status"] != "Failed" || first["payload"] != `{"n":1}` || first["id"] == delivered.ID {
		t.Errorf("resend = %v", first)
	}
	keyed := s.expect(http.StatusCreated, "POST", "/v1/deliveries/"+delivered.ID+"/resend", s.admin, "", "Idempotency-Key", "button-7").object(t)
	again := s.expect(http.StatusOK, "POST", "/v1/deliveries/"+delivered.ID+"/resend", s.admin, "", "Idempotency-Key", "button-7").object(t)
	if keyed["id"] != again["id"] || keyed["id"] == first["id"] {
		t.Errorf("keyed resends %v and %v, want one new delivery", keyed["id"], again["id"])
	}
	s.db.Model(&models.Delivery{}).Where("resent_from = ?", delivered.ID).Count(&n)
	if n != 2 {
		t.Errorf("%d resends stored, want 2 (one unkeyed, one keyed)", n)
	}
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "Idempotency-Key", "POST", "/v1/deliveries/"+delivered.ID+"/resend", s.admin, "", "Idempotency-Key", strings.Repeat("k", 101))
	s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/deliveries/nope/resend", s.admin, "")
}

// TestDeliveryDocAndTimeFilters lists one document's deliveries within a
// time range, page by page: every page holds only matching rows, and a
// doc_name without its doctype, or a time that is not RFC 3339, is refused.
func TestDeliveryDocAndTimeFilters(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var want []string
	for i := range 6 {
		at := t0.Add(time.Duration(i) * time.Minute)
		d := s.addDelivery("orders", models.StatusDelivered, at)
		other := s.addDelivery("orders", models.StatusDelivered, at)
		if err := s.db.Model(&models.Delivery{}).Where("id = ?", other.ID).Update("doc_name", "N-2").Error; err != nil {
			t.Fatal(err)
		}
		typ := s.addDelivery("orders", models.StatusDelivered, at)
		if err := s.db.Model(&models.Delivery{}).Where("id = ?", typ.ID).Update("doc_type", "Task").Error; err != nil {
			t.Fatal(err)
		}
		if i >= 1 && i < 5 { // since t0+1m inclusive, until t0+5m exclusive
			want = append(want, d.ID)
		}
	}
	slices.Reverse(want)

	base := "?doc_type=Note&doc_name=N-1&since=" + url.QueryEscape(t0.Add(time.Minute).Format(time.RFC3339)) +
		"&until=" + url.QueryEscape(t0.Add(5*time.Minute).Format(time.RFC3339)) + "&limit=3"
	var got []string
	query := base
	for pages := 1; ; pages++ {
		if pages > 3 {
			t.Fatal("the listing does not end")
		}
		p := s.page(query)
		for _, d := range p.Deliveries {
			if d["doc_type"] != "Note" || d["doc_name"] != "N-1" {
				t.Errorf("filtered page holds %v", d)
			}
			got = append(got, d["id"].(string))
		}
		if p.NextCursor == nil {
			break
		}
		query = base + "&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if !slices.Equal(got, want) {
		t.Errorf("doc_type, doc_name, since, until\n got %v\nwant %v", got, want)
	}
	if p := s.page("?doc_type=Task"); len(p.Deliveries) != 6 {
		t.Errorf("doc_type=Task: %d deliveries, want 6", len(p.Deliveries))
	}
	if p := s.page("?since=" + url.QueryEscape(t0.Add(5*time.Minute).Format(time.RFC3339Nano))); len(p.Deliveries) != 3 {
		t.Errorf("since the last minute: %d deliveries, want 3", len(p.Deliveries))
	}

	for _, tc := range []struct{ query, field string }{
		{"?doc_name=N-1", "doc_name"},
		{"?since=24h", "since"},
		{"?until=2026-12-02", "until"},
		{"?since=2026-12-02T12:05:00Z&until=2026-12-02T12:00:00Z", "until"},
	} {
		s.refused(http.StatusUnprocessableEntity, "invalid_request", tc.field, "GET", "/v1/deliveries"+tc.query, s.admin, "")
	}
}
