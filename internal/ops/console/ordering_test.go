package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/models"
)

// The order setting is in the console's form and the portal's simple form
// (it is what the receiver needs, like the rate limit), shown on the
// webhook's page, and a held delivery's page says, in words, what it is
// held behind, in the console and in the portal.
func TestOrderingIsSetInTheFormsAndAHeldDeliverySaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	c := s.login(s.admin)
	if _, body := s.do("GET", "/console/webhooks/orders/edit", nil, c, nil); !strings.Contains(body, `<option value="none" selected>as they come</option>`) {
		t.Fatalf("the console's edit form lacks the order, as they come:\n%s", body)
	}
	csrf := s.csrf(c, "/console/webhooks/orders/edit")
	form := newForm(csrf, "orders", "https://example.com/hook")
	form.Set("ordering", "by title")
	if res, body := s.do("POST", "/console/webhooks/orders", form, c, nil); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `\"none\" or \"document\"`) && !strings.Contains(body, `&#34;none&#34; or &#34;document&#34;`) {
		t.Fatalf("a bad order: %d\n%s", res.StatusCode, body)
	}
	form.Set("ordering", "document")
	if res, body := s.do("POST", "/console/webhooks/orders", form, c, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", res.StatusCode, body)
	}
	w, err := s.hooks.Get(ctx, "", "orders")
	if err != nil || w.Ordering != models.OrderingDocument {
		t.Fatalf("orders after the edit: ordering %q (%v)", w.Ordering, err)
	}
	if _, body := s.do("GET", "/console/webhooks/orders", nil, c, nil); !strings.Contains(body, "by document: each document") {
		t.Fatalf("the webhook's page does not show its order:\n%s", body)
	}

	// d-1 (SO-1, Failed, attempted) heads its key; d-2 is held behind it.
	one, two := int64(1), int64(2)
	if err := s.db.Model(&models.Delivery{}).Where("id = ?", "d-1").Update("accept_seq", one).Error; err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	later := now.Add(time.Minute)
	if err := s.db.Create(&models.Delivery{ID: "d-2", WebhookID: w.ID, WebhookName: "orders", EventID: "ev-2", DocType: "Sales Order",
		DocName: "SO-1", DocEvent: "on_submit", Method: "POST", URL: "https://example.com/hook", Payload: []byte(`{"name":"SO-1"}`),
		Status: models.StatusFailed, MaxRetries: 3, NextRetry: &later, AcceptSeq: &two, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	if _, body := s.do("GET", "/console/deliveries/d-2", nil, c, nil); !strings.Contains(body, `Held behind delivery <a href="/console/deliveries/d-1">d-1</a>`) ||
		!strings.Contains(body, "Waiting: the first attempt goes out once the delivery before it of this document is delivered or given up") {
		t.Fatalf("the held delivery's page does not say what it waits for:\n%s", body)
	}
	if _, body := s.do("GET", "/console/deliveries/d-1", nil, c, nil); strings.Contains(body, "Held behind") {
		t.Fatalf("the head of its document is shown held:\n%s", body)
	}
	// The list says it too, of d-2 alone (d-1, at the head, is retrying).
	const waiting = "Waiting: the first attempt goes out once the delivery before it of this document is delivered or given up"
	if _, body := s.do("GET", "/console/deliveries?webhook=orders", nil, c, nil); strings.Count(body, waiting) != 1 || !strings.Contains(body, "d-1") {
		t.Fatalf("the deliveries list does not say, of d-2 alone, that it waits (%d times):\n%s", strings.Count(body, waiting), body)
	}

	// The portal's simple form shows the order, and its edit sets it.
	ck := s.acmePortal()
	if _, body := s.do("GET", "/portal/webhooks/acme-orders/edit", nil, ck, nil); !strings.Contains(body, `name="ordering"`) {
		t.Fatalf("the portal's form lacks the order:\n%s", body)
	}
	pf := newForm(s.csrf(ck, "/portal/webhooks/acme-orders/edit"), "acme-orders", "https://acme.example/hook")
	pf.Set("ordering", "document")
	if res, body := s.do("POST", "/portal/webhooks/acme-orders", pf, ck, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("portal save: %d\n%s", res.StatusCode, body)
	}
	if w, err := s.hooks.Get(ctx, "acme", "acme-orders"); err != nil || w.Ordering != models.OrderingDocument {
		t.Fatalf("acme-orders after the portal's edit: ordering %q (%v)", w.Ordering, err)
	}
	aw, _ := s.hooks.Get(ctx, "acme", "acme-orders")
	if err := s.db.Model(&models.Delivery{}).Where("id = ?", "a-1").Update("accept_seq", one).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Create(&models.Delivery{ID: "a-2", Tenant: "acme", WebhookID: aw.ID, WebhookName: "acme-orders", EventID: "ev-a2", DocType: "Sales Order",
		DocName: "SO-A", DocEvent: "on_submit", Method: "POST", URL: "https://acme.example/hook", Payload: []byte(`{"name":"SO-A"}`),
		Status: models.StatusFailed, MaxRetries: 3, NextRetry: &later, AcceptSeq: &two, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	if _, body := s.do("GET", "/portal/deliveries/a-2", nil, ck, nil); !strings.Contains(body, `Held behind delivery <a href="/portal/deliveries/a-1">a-1</a>`) {
		t.Fatalf("the portal's held delivery does not say what it waits for:\n%s", body)
	}
	if _, body := s.do("GET", "/portal/deliveries", nil, ck, nil); strings.Count(body, waiting) != 1 {
		t.Fatalf("the portal's deliveries list does not say, of a-2 alone, that it waits (%d times):\n%s", strings.Count(body, waiting), body)
	}
}
