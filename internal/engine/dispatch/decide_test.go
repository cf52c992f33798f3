package dispatch

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/models"
)

func TestDecideStatusRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hdr := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	fail := errors.New("failed")
	tests := []struct {
		name       string
		attempts   int
		maxRetries int
		mode       Mode
		res        send.Result
		status     string
		in         time.Duration // 0 = no next retry
		gone       bool
	}{
		{"2xx delivered", 1, 3, First, send.Result{StatusCode: 204, Class: send.Class2xx}, models.StatusDelivered, 0, false},
		{"5xx first failure", 1, 3, First, send.Result{StatusCode: 500, Class: send.Class5xx, Err: fail}, models.StatusFailed, 5 * time.Minute, false},
		{"timeout backs off like any failure", 2, 3, Retry, send.Result{Class: send.ClassTimeout, Err: fail}, models.StatusFailed, 30 * time.Minute, false},
		{"connection refused", 3, 3, Retry, send.Result{Class: send.ClassConnection, Err: fail}, models.StatusFailed, 2 * time.Hour, false},
		{"3xx is a failure", 1, 3, First, send.Result{StatusCode: 302, Class: send.Class3xx, Err: fail}, models.StatusFailed, 5 * time.Minute, false},
		{"budget used up", 4, 3, Retry, send.Result{StatusCode: 500, Class: send.Class5xx, Err: fail}, models.StatusExhausted, 0, false},
		{"max_retries 0 is final", 1, 0, First, send.Result{StatusCode: 500, Class: send.Class5xx, Err: fail}, models.StatusExhausted, 0, false},
		{"unbuildable is final", 1, 3, First, send.Result{Class: send.ClassInvalid, Err: fail}, models.StatusExhausted, 0, false},
		{"sync failure is final", 1, 0, Sync, send.Result{StatusCode: 500, Class: send.Class5xx, Err: fail}, models.StatusExhausted, 0, false},
		{"410 gone", 1, 3, First, send.Result{StatusCode: 410, Class: send.Class4xx, Err: fail}, models.StatusExhausted, 0, true},
		{"503 Retry-After seconds later than schedule", 1, 3, First, send.Result{StatusCode: 503, Class: send.Class5xx, Header: hdr("3600"), Err: fail}, models.StatusFailed, time.Hour, false},
		{"429 Retry-After sooner than schedule keeps schedule", 1, 3, First, send.Result{StatusCode: 429, Class: send.Class4xx, Header: hdr("10"), Err: fail}, models.StatusFailed, 5 * time.Minute, false},
		{"Retry-After capped at last entry", 1, 3, First, send.Result{StatusCode: 503, Class: send.Class5xx, Header: hdr("999999"), Err: fail}, models.StatusFailed, 10 * time.Hour, false},
		{"Retry-After HTTP date", 1, 3, First, send.Result{StatusCode: 503, Class: send.Class5xx, Header: hdr(now.Add(90 * time.Minute).Format(http.TimeFormat)), Err: fail}, models.StatusFailed, 90 * time.Minute, false},
		{"Retry-After ignored on 500", 1, 3, First, send.Result{StatusCode: 500, Class: send.Class5xx, Header: hdr("3600"), Err: fail}, models.StatusFailed, 5 * time.Minute, false},
		{"garbage Retry-After ignored", 1, 3, First, send.Result{StatusCode: 503, Class: send.Class5xx, Header: hdr("soon"), Err: fail}, models.StatusFailed, 5 * time.Minute, false},
	}
	// The reason homing_deliveries_total counts the final ones under.
	reasons := map[string]string{
		"2xx delivered":          models.ReasonAccepted,
		"budget used up":         models.ReasonRetriesSpent,
		"max_retries 0 is final": models.ReasonRetriesSpent,
		"unbuildable is final":   models.ReasonUnbuildable,
		"sync failure is final":  models.ReasonSynchronous,
		"410 gone":               models.ReasonGone,
	}
	for _, tt := range tests {
		got := decide(DefaultSchedule, now, tt.attempts, tt.maxRetries, tt.mode, tt.res)
		if want, ok := reasons[tt.name]; ok && got.reason != want {
			t.Errorf("%s: reason %q, want %q", tt.name, got.reason, want)
		}
		if !slices.Contains(models.Reasons[got.status], got.reason) {
			t.Errorf("%s: reason %q is not one of %s's", tt.name, got.reason, got.status)
		}
		if got.status != tt.status || got.gone != tt.gone {
			t.Errorf("%s: status %s gone %v, want %s %v", tt.name, got.status, got.gone, tt.status, tt.gone)
			continue
		}
		switch {
		case tt.in == 0 && got.next != nil:
			t.Errorf("%s: next retry %s, want none", tt.name, got.next)
		case tt.in != 0 && (got.next == nil || got.next.Sub(now) != tt.in):
			t.Errorf("%s: next retry %v, want +%s", tt.name, got.next, tt.in)
		}
		if (got.status == models.StatusFailed) != (got.next != nil) {
			t.Errorf("%s: Failed must go with a next retry and nothing else", tt.name)
		}
	}
}

func TestRefusalRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	due, later := now.Add(-time.Minute), now.Add(time.Minute)
	fresh := models.Delivery{ID: "d", Status: models.StatusFailed, NextRetry: &later}
	retry := models.Delivery{ID: "d", Status: models.StatusFailed, Attempts: 1, NextRetry: &due}
	notDue := models.Delivery{ID: "d", Status: models.StatusFailed, Attempts: 1, NextRetry: &later}
	sync := models.Delivery{ID: "d", Status: models.StatusExhausted}
	on, off := &models.Webhook{Enabled: true}, &models.Webhook{}
	probe, other := "d", "e"
	failing := models.WebhookHealth{Failures: models.FailingAfter, FailingSince: &due}
	failingProbe, failingOther := failing, failing
	failingProbe.ProbeID, failingOther.ProbeID = &probe, &other
	tests := []struct {
		name string
		c    storage.Claim
		mode Mode
		want refusalKind
	}{
		{"missing", storage.Claim{}, First, refusedMissing},
		{"first attempt already made", storage.Claim{Found: true, Row: retry, Hook: on}, First, refusedState},
		{"retry not due", storage.Claim{Found: true, Row: notDue, Hook: on}, Retry, refusedState},
		{"not claimable beats a disabled webhook", storage.Claim{Found: true, Row: notDue, Hook: off}, Retry, refusedState},
		{"sync row already attempted", storage.Claim{Found: true, Row: models.Delivery{Status: models.StatusExhausted, Attempts: 1}, Hook: on}, Sync, refusedState},
		{"webhook deleted", storage.Claim{Found: true, Row: fresh}, First, refusedWebhookDeleted},
		{"webhook disabled", storage.Claim{Found: true, Row: retry, Hook: off}, Retry, refusedWebhookDisabled},
		{"disabled beats held", storage.Claim{Found: true, Row: retry, Hook: off, Health: failing}, Retry, refusedWebhookDisabled},
		{"retry held, no probe chosen", storage.Claim{Found: true, Row: retry, Hook: on, Health: failing}, Retry, refusedHeld},
		{"retry held behind another probe", storage.Claim{Found: true, Row: retry, Hook: on, Health: failingOther}, Retry, refusedHeld},
		{"the probe is not held, so it was taken", storage.Claim{Found: true, Row: retry, Hook: on, Health: failingProbe}, Retry, refusedTaken},
		{"a first attempt is never held", storage.Claim{Found: true, Row: fresh, Hook: on, Health: failing}, First, refusedTaken},
		{"sync taken", storage.Claim{Found: true, Row: sync, Hook: on}, Sync, refusedTaken},
		{"first attempt, tenant disabled", storage.Claim{Found: true, Row: fresh, Hook: on, TenantDisabled: true}, First, refusedTenantDisabled},
		{"retry, tenant disabled", storage.Claim{Found: true, Row: retry, Hook: on, TenantDisabled: true}, Retry, refusedTenantDisabled},
		{"sync, tenant disabled", storage.Claim{Found: true, Row: sync, Hook: on, TenantDisabled: true}, Sync, refusedTenantDisabled},
		{"a disabled tenant beats held", storage.Claim{Found: true, Row: retry, Hook: on, Health: failing, TenantDisabled: true}, Retry, refusedTenantDisabled},
		{"not claimable beats a disabled tenant", storage.Claim{Found: true, Row: notDue, Hook: on, TenantDisabled: true}, Retry, refusedState},
		{"a disabled webhook beats a disabled tenant", storage.Claim{Found: true, Row: retry, Hook: off, TenantDisabled: true}, Retry, refusedWebhookDisabled},
		{"first attempt behind an earlier one of its document", storage.Claim{Found: true, Row: fresh, Hook: on, Blocked: true}, First, refusedOrdered},
		{"retry behind an earlier one of its document", storage.Claim{Found: true, Row: retry, Hook: on, Blocked: true}, Retry, refusedOrdered},
		{"not claimable beats ordered", storage.Claim{Found: true, Row: notDue, Hook: on, Blocked: true}, Retry, refusedState},
		{"a disabled webhook beats ordered: abandoned, which wakes the next", storage.Claim{Found: true, Row: retry, Hook: off, Blocked: true}, Retry, refusedWebhookDisabled},
		{"a disabled tenant beats ordered", storage.Claim{Found: true, Row: fresh, Hook: on, TenantDisabled: true, Blocked: true}, First, refusedTenantDisabled},
		{"held while failing beats ordered", storage.Claim{Found: true, Row: retry, Hook: on, Health: failing, Blocked: true}, Retry, refusedHeld},
		{"sync is never ordered", storage.Claim{Found: true, Row: sync, Hook: on, Blocked: true}, Sync, refusedTaken},
	}
	for _, tt := range tests {
		if got := refusal(tt.c, tt.mode, now); got != tt.want {
			t.Errorf("%s: refusal %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestLeaseAllowsSending: an attempt sends only while its lease covers the
// request's timeout and the time to record it; a fresh claim always may
// (the rule is held against storage.Lease, which sets the lease).
func TestLeaseAllowsSending(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hook := models.Webhook{TimeoutMS: 5000}
	fresh := storage.Lease(now, hook)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	tests := []struct {
		name    string
		lease   *time.Time
		now     time.Time
		timeout time.Duration
		want    bool
	}{
		{"fresh claim", &fresh, now, hook.Timeout(), true},
		{"fresh claim, longest timeout", ptrTime(storage.Lease(now, models.Webhook{TimeoutMS: 30000})), now, 30 * time.Second, true},
		{"exactly timeout and margin left", at(5*time.Second + RecordMargin), now, 5 * time.Second, true},
		{"a moment less", at(5*time.Second + RecordMargin - time.Microsecond), now, 5 * time.Second, false},
		{"inline attempt waited past the margin", &fresh, now.Add(storage.LeaseMargin - RecordMargin + time.Second), hook.Timeout(), false},
		{"lease ended", &fresh, fresh.Add(time.Second), hook.Timeout(), false},
		{"no lease (sync)", nil, now, hook.Timeout(), true},
	}
	for _, tt := range tests {
		if got := leaseAllows(tt.lease, tt.now, tt.timeout); got != tt.want {
			t.Errorf("%s: leaseAllows = %v, want %v", tt.name, got, tt.want)
		}
	}
	if RecordMargin >= storage.LeaseMargin {
		t.Fatalf("RecordMargin %s must be less than storage.LeaseMargin %s, or no claim could send", RecordMargin, storage.LeaseMargin)
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
