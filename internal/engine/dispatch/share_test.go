package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// A tenant has its share of a process's requests whatever the others do;
// past it, it borrows idle slots while the process keeps a share free, and
// is refused once only that share is free. The default tenant is never
// refused but its requests count; with no bound nobody is refused.
func TestTenantShareKeepsAShareFree(t *testing.T) {
	t.Parallel()
	type step struct {
		take   bool // take (true) or give (false)
		tenant string
		want   bool // take's answer
	}
	for _, c := range []struct {
		name       string
		max, slots int
		steps      []step
	}{
		{"its share, no more when none is idle", 2, 4, []step{{true, "acme", true}, {true, "acme", true}, {true, "acme", false}}},
		{"borrows idle slots, leaving a share free", 1, 4, []step{{true, "acme", true}, {true, "acme", true}, {true, "acme", true}, {true, "acme", false}, {true, "initech", true}, {true, "initech", false}}},
		{"a request ended frees its place", 1, 1, []step{{true, "acme", true}, {true, "acme", false}, {false, "acme", false}, {true, "acme", true}}},
		{"the default tenant is never refused, and counts", 1, 2, []step{{true, models.DefaultTenant, true}, {true, models.DefaultTenant, true}, {true, "", true}, {true, "acme", true}, {true, "acme", false}}},
		{"no bound", 0, 2, []step{{true, "acme", true}, {true, "acme", true}, {true, "acme", true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newTenantShare(c.max, c.slots)
			for i, st := range c.steps {
				if !st.take {
					s.give(st.tenant)
					continue
				}
				// No wait: what the share answers at once.
				if got := s.take(context.Background(), st.tenant, 0); got != st.want {
					t.Fatalf("step %d: take(%q) = %v, want %v", i, st.tenant, got, st.want)
				}
			}
		})
	}
}

// An attempt past its tenant's share waits for a request of the process
// to end: one ending while it waits lets it through (a tenant whose
// receivers answer quickly is never refused for another's borrowed
// slots); none ending, it is refused when its wait ends.
func TestTenantShareWaitsForARequestToEnd(t *testing.T) {
	t.Parallel()
	// Three slots, a share of one: with acme's and initech's requests in
	// flight only one is free, kept for others, so acme past its share
	// waits.
	s := newTenantShare(1, 3)
	ctx := context.Background()
	if !s.take(ctx, "acme", 0) || !s.take(ctx, "initech", 0) {
		t.Fatal("each tenant's share refused")
	}
	got := make(chan bool, 1)
	go func() { got <- s.take(ctx, "acme", time.Hour) }()
	testenv.Eventually(t, "acme's second take to wait", func() bool { return s.waiters.Load() == 1 })
	s.give("initech")
	if !<-got {
		t.Fatal("acme's take waiting while initech's request ended: refused, want it through")
	}
	// Nothing ends now: the wait ends, and the take is refused.
	if s.take(ctx, "acme", time.Millisecond) {
		t.Fatal("acme past its share with no slot free and none freed: let through, want refused")
	}
	// A cancelled attempt (a shutdown) stops waiting.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if s.take(cancelled, "acme", time.Hour) {
		t.Fatal("a cancelled take let through, want refused")
	}
}

// With a tenant past its share of requests in flight (here one of two
// slots: a receiver that does not answer) and no more than a share free,
// its next attempt makes no request: its claim is given
// back, the delivery Failed and due shareWait later with no attempt
// counted, and a sweep's retry sends it once the first request has ended.
// Another tenant's attempt to the same receiver meanwhile is sent. (One
// tenant's receivers that never answered used to hold every slot of a
// shared queue for their timeout.)
func TestAnAttemptOverItsTenantsShareWaits(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			rc := testreceiver.New(t)
			d, clk := tenantBed(t, db, rc)
			sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
			t.Cleanup(sender.Close)
			d = New(db, sender, nil, Config{Clock: clk, TenantRequests: 1, InlineRequests: 2})
			ctx := context.Background()
			now := clk.Now()
			if err := db.Create(&models.Tenant{Name: "initech", Enabled: true, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Create(&models.Webhook{
				ID: "initech-hook", Tenant: "initech", Name: "orders", DocType: "Sales Order", DocEvent: "on_submit", RequestURL: rc.URL + "/initech",
				RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
				Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 5000, CreatedAt: now, UpdatedAt: now,
			}).Error; err != nil {
				t.Fatal(err)
			}
			row := func(id, tenant, hook string) {
				t.Helper()
				r := testenv.PlannedDelivery(id, "ev-"+id, hook, now)
				r.Tenant, r.URL = tenant, rc.URL+"/"+hook
				if err := db.Create(&r).Error; err != nil {
					t.Fatal(err)
				}
			}
			row("a1", "acme", "queued")
			row("a2", "acme", "queued")
			row("i1", "initech", "initech-hook")

			release := rc.Hold()
			first := make(chan Outcome, 1)
			go func() {
				out, err := d.Attempt(ctx, "a1", First)
				if err != nil {
					t.Error(err)
				}
				first <- out
			}()
			testenv.Eventually(t, "acme's first request to reach the receiver", func() bool { return rc.Count() == 1 })

			out, err := d.Attempt(ctx, "a2", First)
			if err != nil || !out.Postponed || out.Status != models.StatusFailed {
				t.Fatalf("acme's second attempt with its share in flight: %+v, %v; want it postponed, Failed", out, err)
			}
			r := loadRow(t, db, "a2")
			if r.Status != models.StatusFailed || r.Attempts != 0 || r.NextRetry == nil || !r.NextRetry.Equal(now) || r.QueuedAt == nil || !r.QueuedAt.Equal(now) {
				t.Fatalf("acme's postponed delivery: %s, %d attempts, due %v, queued %v; want Failed, unattempted, parked: due and marked queued at %v", r.Status, r.Attempts, r.NextRetry, r.QueuedAt, now)
			}
			if n := rc.Count(); n != 1 {
				t.Fatalf("the receiver got %d requests, want only acme's first: its second waits", n)
			}

			// initech has a share of its own; its request goes out and
			// waits at the receiver with acme's.
			other := make(chan error, 1)
			go func() {
				_, err := d.Attempt(ctx, "i1", First)
				other <- err
			}()
			testenv.Eventually(t, "initech's request to reach the receiver", func() bool { return rc.Count() == 2 })

			// acme's first request ends: its goroutine sends the parked
			// second before its Attempt returns, with no sweep and no
			// time passing.
			release()
			if out := <-first; out.Status != models.StatusDelivered {
				t.Fatalf("acme's first attempt: %+v, want Delivered", out)
			}
			if r := loadRow(t, db, "a2"); r.Status != models.StatusDelivered || r.Attempts != 1 {
				t.Fatalf("acme's parked delivery once its first request ended: %s after %d attempts; want Delivered after 1", r.Status, r.Attempts)
			}
			if err := <-other; err != nil {
				t.Fatal(err)
			}
			if _, err := d.Attempt(ctx, "a2", Retry); !errors.Is(err, ErrNotClaimed) {
				t.Fatalf("a retry of the delivery resume sent: %v, want ErrNotClaimed", err)
			}
			for id, n := range rc.CountBy("webhook-id") {
				if n != 1 {
					t.Errorf("delivery %s reached the receiver %d times, want once", id, n)
				}
			}
		})
	}
}

// What a process parks is bounded per tenant (parkPerShare of its share)
// and in all (parkPerSlot of its slots), and comes back oldest first; a
// place kept and not used is given back.
func TestTenantShareParksWithinItsBounds(t *testing.T) {
	t.Parallel()
	s := newTenantShare(1, 2) // a tenant parks 16, the process 128
	for i := range parkPerShare {
		if !s.reservePark("acme") {
			t.Fatalf("acme's park %d refused, want room for %d", i, parkPerShare)
		}
		s.park("acme", fmt.Sprint("a", i))
	}
	if s.reservePark("acme") {
		t.Fatalf("acme's park %d kept, want refused past %d × its share", parkPerShare+1, parkPerShare)
	}
	if !s.reservePark("initech") {
		t.Fatal("initech's first park refused while acme is full")
	}
	s.unreserve("initech")
	for i := range parkPerShare {
		if got, want := s.unpark("acme"), fmt.Sprint("a", i); got != want {
			t.Fatalf("unpark %d = %q, want %q (oldest first)", i, got, want)
		}
	}
	if got := s.unpark("acme"); got != "" {
		t.Fatalf("unpark of an empty tenant = %q, want none", got)
	}
	if s.heldAll != 0 || len(s.held) != 0 || len(s.parked) != 0 {
		t.Fatalf("after every park ended: %d held, %v, %v; want nothing", s.heldAll, s.held, s.parked)
	}

	all := newTenantShare(parkPerSlot, 1) // the process parks 64, a tenant 1,024
	for i := range parkPerSlot {
		if !all.reservePark(fmt.Sprint("t", i%3)) {
			t.Fatalf("park %d refused, want room for %d", i, parkPerSlot)
		}
	}
	if all.reservePark("t9") {
		t.Fatalf("park %d kept, want refused past %d × the process's slots", parkPerSlot+1, parkPerSlot)
	}
}

// With nothing more to be parked, an attempt over its tenant's share is
// given back as before parking: due shareWait later for a sweep, not
// marked queued.
func TestAnAttemptOverItsShareWithNoRoomToParkIsDueLater(t *testing.T) {
	t.Parallel()
	db, rc, d, clk := shareBed(t)
	now := clk.Now()
	for i := range parkPerShare {
		if !d.share.reservePark("acme") {
			t.Fatalf("park %d refused", i)
		}
	}
	r := testenv.PlannedDelivery("a1", "ev-a1", "queued", now)
	r.Tenant, r.URL = "acme", rc.URL+"/queued"
	if err := db.Create(&r).Error; err != nil {
		t.Fatal(err)
	}
	d.share.take(context.Background(), "acme", 0) // acme's share in flight
	out, err := d.Attempt(context.Background(), "a1", First)
	if err != nil || !out.Postponed {
		t.Fatalf("attempt over acme's share: %+v, %v; want postponed", out, err)
	}
	got := loadRow(t, db, "a1")
	if got.Status != models.StatusFailed || got.Attempts != 0 || got.NextRetry == nil || !got.NextRetry.Equal(now.Add(shareWait)) || got.QueuedAt != nil {
		t.Fatalf("delivery not parked: %s, %d attempts, due %v, queued %v; want Failed, unattempted, due %v, unmarked", got.Status, got.Attempts, got.NextRetry, got.QueuedAt, now.Add(shareWait))
	}
	if rc.Count() != 0 {
		t.Fatalf("the receiver got %d requests, want none", rc.Count())
	}
}

// A resumed attempt runs inside another task's deadline: when that can
// no longer cover its request's timeout and RecordMargin, the claim is
// given back unsent, due now for the sweep, and resume stops.
func TestAResumedAttemptPastItsTasksDeadlineIsGivenBack(t *testing.T) {
	t.Parallel()
	db, rc, d, clk := shareBed(t)
	now := clk.Now()
	for _, id := range []string{"a1", "a2"} {
		r := testenv.PlannedDelivery(id, "ev-"+id, "queued", now)
		r.Tenant, r.URL = "acme", rc.URL+"/queued"
		r.NextRetry, r.QueuedAt = &now, &now // as Park leaves it
		if err := db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
		if !d.share.reservePark("acme") {
			t.Fatal("park refused")
		}
		d.share.park("acme", id)
	}
	// The webhook's timeout is 5 s: a task with 10 s left cannot cover it
	// and RecordMargin (30 s), and 10 s leave a loaded machine time to
	// reach the check before the context itself ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.follow(ctx, Outcome{freed: "acme"})
	if rc.Count() != 0 {
		t.Fatalf("the receiver got %d requests, want none", rc.Count())
	}
	got := loadRow(t, db, "a1")
	if got.Status != models.StatusFailed || got.Attempts != 0 || got.NextRetry == nil || !got.NextRetry.Equal(now) || got.QueuedAt != nil {
		t.Fatalf("a1 given back: %s, %d attempts, due %v, queued %v; want Failed, unattempted, due now, unmarked for the sweep", got.Status, got.Attempts, got.NextRetry, got.QueuedAt)
	}
	if id := d.share.unpark("acme"); id != "a2" {
		t.Fatalf("still parked: %q, want a2 (follow stopped at a1)", id)
	}
}

// A request's end resumes what its tenant has parked (give counts it out,
// then its goroutine unparks), so a delivery parked while the tenant has
// a request in flight waits for that end; one parked after the tenant's
// last request ended has none to wait for: stranded says so.
func TestTenantShareSaysWhenNoRequestIsLeftToResumeItsParked(t *testing.T) {
	t.Parallel()
	s := newTenantShare(1, 2)
	if s.stranded("acme") {
		t.Fatal("a tenant with nothing parked is stranded")
	}
	s.take(context.Background(), "acme", 0)
	s.reservePark("acme")
	if s.park("acme", "a1"); s.stranded("acme") {
		t.Fatal("a delivery parked with its tenant's request in flight is stranded, want resumed by that request's end")
	}
	s.give("acme")
	if !s.stranded("acme") {
		t.Fatal("the tenant's last request ended with a1 parked: not stranded")
	}
	s.reservePark("acme")
	if s.park("acme", "a2"); !s.stranded("acme") {
		t.Fatal("a delivery parked with no request of its tenant in flight: not stranded")
	}
	s.unpark("acme")
	s.unpark("acme")
	if s.stranded("acme") {
		t.Fatal("a tenant whose parked deliveries were all taken is stranded")
	}
}

// An attempt refused by its tenant's share parks its delivery for the end
// of one of the tenant's requests; when the last of them ended between the
// refusal and the park, none is left to end, and the goroutine that
// parked it sends it, instead of leaving it for the sweep after the queued
// mark's minute.
func TestADeliveryParkedAfterItsTenantsLastRequestEndedIsSentAtOnce(t *testing.T) {
	t.Parallel()
	db, rc, d, clk := shareBed(t)
	now := clk.Now()
	r := testenv.PlannedDelivery("a1", "ev-a1", "queued", now)
	r.Tenant, r.URL = "acme", rc.URL+"/queued"
	r.Attempts = 1 // as the refused attempt's claim left it, its lease due a minute on
	if err := db.Create(&r).Error; err != nil {
		t.Fatal(err)
	}
	// The share refused the attempt while acme had a request in flight;
	// that request has ended since (none is counted now).
	out, err := d.overShare(context.Background(), claimed{row: r})
	if err != nil || !out.Postponed || out.freed != "acme" {
		t.Fatalf("park with no request of acme in flight: %+v, %v; want postponed, naming acme for this goroutine to resume", out, err)
	}
	d.follow(context.Background(), out)
	if got := loadRow(t, db, "a1"); got.Status != models.StatusDelivered || got.Attempts != 1 {
		t.Fatalf("a1 after its parker's follow: %s after %d attempts; want Delivered after 1", got.Status, got.Attempts)
	}
	if n := rc.Count(); n != 1 {
		t.Fatalf("the receiver got %d requests, want 1", n)
	}
}

// A resumed delivery that is postponed (here by its webhook's rate limit)
// does not end the resuming when its tenant has no request left in flight
// to resume the rest: the next parked one is sent.
func TestAPostponedResumeGoesOnWhenNoRequestIsLeftToResumeTheRest(t *testing.T) {
	t.Parallel()
	db, rc, _, clk := shareBed(t)
	_, rdb := testenv.Redis(t)
	limiter := ratelimit.New(rdb)
	sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
	t.Cleanup(sender.Close)
	d := New(db, sender, nil, Config{Clock: clk, TenantRequests: 1, InlineRequests: 2, Limiter: limiter})
	ctx := context.Background()
	if err := db.Model(&models.Webhook{}).Where("id = ?", "queued").Update("rate_limit", 1).Error; err != nil {
		t.Fatal(err)
	}
	if err := limiter.Spend(ctx, "queued", time.Hour); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	for _, p := range []struct{ id, hook string }{{"a1", "queued"}, {"a2", "inline"}} {
		r := testenv.PlannedDelivery(p.id, "ev-"+p.id, p.hook, now)
		r.Tenant, r.URL = "acme", rc.URL+"/"+p.hook
		r.NextRetry, r.QueuedAt = &now, &now // as Park leaves it
		if err := db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
		d.share.reservePark("acme")
		d.share.park("acme", p.id)
	}
	d.follow(ctx, Outcome{freed: "acme"})
	if got := loadRow(t, db, "a1"); got.Status != models.StatusFailed || got.Attempts != 0 || got.NextRetry == nil || !got.NextRetry.After(now) {
		t.Fatalf("a1 with its webhook's budget spent: %s, %d attempts, due %v; want Failed, unattempted, due later", got.Status, got.Attempts, got.NextRetry)
	}
	if got := loadRow(t, db, "a2"); got.Status != models.StatusDelivered || got.Attempts != 1 {
		t.Fatalf("a2, parked behind a1 with no request of acme in flight: %s after %d attempts; want Delivered after 1", got.Status, got.Attempts)
	}
	if id := d.share.unpark("acme"); id != "" {
		t.Fatalf("still parked: %q, want nothing", id)
	}
}

// shareBed is tenantBed on SQLite with a dispatcher of two slots whose
// tenants have a share of one request each.
func shareBed(t *testing.T) (*gorm.DB, *testreceiver.Receiver, *Dispatcher, *clock.Stub) {
	t.Helper()
	db := testenv.SQLite(t)
	rc := testreceiver.New(t)
	_, clk := tenantBed(t, db, rc)
	sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
	t.Cleanup(sender.Close)
	return db, rc, New(db, sender, nil, Config{Clock: clk, TenantRequests: 1, InlineRequests: 2}), clk
}
