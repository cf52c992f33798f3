package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/models"
)

// listedIDs are the deliveries a list page shows, in its order.
var listedIDs = regexp.MustCompile(`<tr class="delivery" data-id="([^"]+)">`)

func listed(body string) string {
	var ids []string
	for _, m := range listedIDs.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return strings.Join(ids, " ")
}

// The deliveries filter's date pickers send datetime-local values, which
// the page reads as UTC; a link or a bookmark sends the API's RFC 3339.
// Both list the same rows, and the picker shows the same value back.
func TestDeliveriesFilterTakesAPickersTimeAsRFC3339(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	hook, err := s.hooks.Get(context.Background(), "", "orders")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 15, 4, 0, 0, time.UTC)
	for i, id := range []string{"at-1504", "at-1604", "at-1704", "at-1804"} {
		at := t0.Add(time.Duration(i) * time.Hour)
		if err := s.db.Create(&models.Delivery{ID: id, WebhookID: hook.ID, WebhookName: "orders", EventID: "ev-" + id, DocType: "Sales Order",
			DocName: "SO-" + id, DocEvent: "on_submit", Method: "POST", URL: "https://example.com/hook", Payload: []byte(`{}`),
			Status: models.StatusDelivered, Attempts: 1, MaxRetries: 3, CreatedAt: at, UpdatedAt: at}).Error; err != nil {
			t.Fatal(err)
		}
	}
	page := func(query string) (int, string) {
		t.Helper()
		res, body := s.do("GET", "/console/deliveries?"+query, nil, c, nil)
		return res.StatusCode, body
	}
	const want = "at-1704 at-1604" // since inclusive, until exclusive, newest first
	pickers := url.Values{"since": {"2026-12-01T16:04"}, "until": {"2026-12-01T18:04"}}.Encode()
	code, picked := page(pickers)
	if code != http.StatusOK || listed(picked) != want {
		t.Fatalf("the pickers' %s: %d, listed %q, want %q\n%s", pickers, code, listed(picked), want, picked)
	}
	for _, q := range []url.Values{
		{"since": {"2026-12-01T16:04:00Z"}, "until": {"2026-12-01T18:04:00Z"}},           // the API's
		{"since": {"2026-12-01T17:04:00+01:00"}, "until": {"2026-12-01T13:04:00-05:00"}}, // the same instants elsewhere
		{"since": {"2026-12-01T16:04:00"}, "until": {"2026-12-01T18:04:00.000"}},         // pickers with seconds
	} {
		code, body := page(q.Encode())
		if code != http.StatusOK || listed(body) != want {
			t.Errorf("%s: %d, listed %q, want %q as the pickers' values list", q.Encode(), code, listed(body), want)
		}
		for _, v := range []string{`id="filter-since" value="2026-12-01T16:04"`, `id="filter-until" value="2026-12-01T18:04"`} {
			if !strings.Contains(body, v) {
				t.Errorf("%s: the picker does not show %s", q.Encode(), v)
			}
		}
	}
	// The page says the pickers are UTC; an RFC 3339 time with seconds is
	// shown to the second, with a step the browser submits as it is.
	if !strings.Contains(picked, `<label for="filter-since">Created from (UTC)</label>`) || !strings.Contains(picked, "Times are UTC") {
		t.Errorf("the page does not say its times are UTC:\n%s", picked)
	}
	if _, body := page("since=2026-12-01T16:04:05Z"); !strings.Contains(body, `value="2026-12-01T16:04:05" step="1"`) || listed(body) != "d-1 at-1804 at-1704" {
		t.Errorf("since 16:04:05Z: listed %q\n%s", listed(body), body)
	}
	// The next page keeps the filter, and a time that is neither is
	// refused, saying what to send.
	code, body := page("since=yesterday")
	if code != http.StatusBadRequest || !strings.Contains(body, `id="filter-error"`) || !strings.Contains(body, `since &#34;yesterday&#34; is not a time such as 2026-12-03T15:04 (UTC) or 2026-12-03T15:04:05Z`) {
		t.Errorf("since=yesterday: %d\n%s", code, body)
	}
	if code, body := page("until=2026-12-01T16:04&since=2026-12-01T16:04:00Z"); code != http.StatusBadRequest || !strings.Contains(body, "is not after since") {
		t.Errorf("until = since: %d\n%s", code, body)
	}
}

// The filter's webhook and doctype are picked from the tenant's webhooks
// and doctypes; a value typed into a link that is not among them (a
// webhook since deleted) is still applied and shown as picked.
func TestDeliveriesFilterPicksFromWhatExists(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	c := s.login(s.admin)
	_, body := s.do("GET", "/console/deliveries?webhook=orders&doc_type=Sales+Order", nil, c, nil)
	for _, want := range []string{`<select name="webhook" id="filter-webhook"><option value="">any</option><option selected>orders</option></select>`,
		`<select name="doc_type" id="filter-doc_type"><option value="">any</option><option selected>Sales Order</option></select>`} {
		if !strings.Contains(body, want) || listed(body) != "d-1" {
			t.Errorf("the filter does not offer and pick %s, or lists %q:\n%s", want, listed(body), body)
		}
	}
	if strings.Contains(body, "acme-orders") {
		t.Errorf("the default tenant's filter offers acme's webhook:\n%s", body)
	}
	_, body = s.do("GET", "/console/deliveries?webhook=gone&doc_type=Quotation", nil, c, nil)
	for _, want := range []string{`<option selected>gone</option><option>orders</option>`, `<option selected>Quotation</option><option>Sales Order</option>`, "No deliveries match"} {
		if !strings.Contains(body, want) {
			t.Errorf("a typed webhook and doctype: no %s\n%s", want, body)
		}
	}
}
