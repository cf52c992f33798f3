package dispatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homingdev/homing/models"
)

// tenantShare keeps a share of this process's requests at receivers free
// for every tenant (Config.TenantRequests: worker.tenant_share of
// worker.concurrency), so that a tenant whose receivers never answer, each
// holding a worker slot for its webhook's timeout (up to 5 minutes),
// cannot hold every slot of a queue it shares with other tenants and hold
// up their first attempts. A tenant other than the default one may always
// have its share in flight; past it, it may borrow idle slots while it is
// the only such tenant with requests in flight and the process keeps a
// share free for the others (it never takes the last max of the process's
// slots), so a tenant alone uses nearly the whole worker, one that holds
// its receivers' slots leaves a share to the rest, and two busy tenants
// each have their share. The default tenant, the operator's own, is never refused: an
// install without tenants runs as it did. Its requests count in the
// process's total.
//
// An attempt refused makes no request and holds no slot while it waits:
// its claim is given back with no attempt counted and the delivery parked
// (park): due now but marked queued, so that no sweep takes it, and sent
// by this process on the goroutine of the next of its tenant's requests
// to end (Dispatcher.follow). A tenant's extra attempts thus keep their
// place, sent as fast as its share of requests ends, instead of going back
// behind every task queued since (a tenant's burst past its share on a
// worker whose receivers answered in a second went round a queue of
// another tenant's backlog again and again). What is parked is bounded
// (parkPerShare, parkPerSlot); past it, or if the process stops, the
// delivery is due shareWait later, or after the queued mark's lease, and
// a sweep queues it again, as the rate limit does.
type tenantShare struct {
	max   int // a tenant's share; 0 is no bound
	slots int // the process's slots (worker.concurrency)
	// total counts every tenant's requests in flight, the default's too.
	total atomic.Int64
	mu    sync.Mutex
	// inflight counts each bounded tenant's requests in flight.
	inflight map[string]int
	// freed is closed, and cleared, when a request ends while takes wait
	// (made by the first take that waits); waiters counts them.
	freed   chan struct{}
	waiters atomic.Int64
	// logged is when each tenant's last refusal was logged at Info (once
	// a minute per tenant; every one is counted in
	// homing_postponed_total{reason="tenant_share"}).
	logged map[string]time.Time
	// parked are, per tenant, the deliveries its share refused that this
	// process sends as the tenant's requests end, oldest first; held
	// counts them per tenant with those being parked (reserved), and
	// heldAll over every tenant, within parkPerShare and parkPerSlot.
	parked  map[string][]string
	held    map[string]int
	heldAll int
}

// parkPerShare bounds the deliveries one tenant may have parked, in
// shares of requests: a burst of sixteen times what it may have in
// flight waits in the process; past that, for the sweep.
const parkPerShare = 16

// parkPerSlot bounds the deliveries parked in one process, in its slots
// (worker.concurrency): 50 slots park at most 3,200 ids, about 300 KB.
const parkPerSlot = 64

// shareWait is how long an attempt refused by its tenant's share waits
// before a sweep queues it again.
const shareWait = time.Second

// shareTakeWait is how long an attempt past its tenant's share waits for a
// slot before it is refused: a request of the process ending in that time
// lets it through, so a tenant whose receivers answer quickly is never
// refused while another holds the rest of the worker.
const shareTakeWait = 200 * time.Millisecond

func newTenantShare(max, slots int) *tenantShare {
	return &tenantShare{max: max, slots: slots, inflight: map[string]int{}, logged: map[string]time.Time{},
		parked: map[string][]string{}, held: map[string]int{}}
}

// bounded says whether tenant's requests are counted against a share.
func (s *tenantShare) bounded(tenant string) bool {
	return s.max > 0 && tenant != "" && tenant != models.DefaultTenant
}

// take counts one request of tenant in flight and says true; or, when
// tenant is past its share and the process has no more than a share of
// its slots free, it waits up to wait for that to change (a request of
// the process ending: a tenant whose receivers answer in milliseconds gets
// a slot at once) and says false (counting nothing) if it did not, or ctx
// ended. The wait is transport time: the wall clock is right here.
func (s *tenantShare) take(ctx context.Context, tenant string, wait time.Duration) bool {
	if !s.bounded(tenant) {
		if s.max > 0 {
			s.total.Add(1)
		}
		return true
	}
	var timer *time.Timer
	for {
		s.mu.Lock()
		if s.inflight[tenant] < s.max || (s.total.Load() < int64(s.slots-s.max) && s.aloneLocked(tenant)) {
			s.inflight[tenant]++
			s.total.Add(1)
			s.mu.Unlock()
			return true
		}
		if s.freed == nil {
			s.freed = make(chan struct{})
		}
		freed := s.freed
		s.waiters.Add(1)
		s.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		var ok bool
		select {
		case <-freed:
			ok = true
		case <-timer.C:
		case <-ctx.Done():
		}
		s.waiters.Add(-1)
		if !ok {
			return false
		}
	}
}

// aloneLocked says whether tenant is the only bounded tenant with
// requests in flight: only then may it borrow past its share, so that two
// busy tenants each keep their share rather than the first to arrive
// keeping what it borrowed while the other's attempts wait.
func (s *tenantShare) aloneLocked(tenant string) bool {
	switch len(s.inflight) {
	case 0:
		return true
	case 1:
		_, ok := s.inflight[tenant]
		return ok
	default:
		return false
	}
}

// give ends one request of tenant that take counted, and wakes the takes
// waiting for a slot.
func (s *tenantShare) give(tenant string) {
	if s.max <= 0 {
		return
	}
	s.total.Add(-1)
	bounded := s.bounded(tenant)
	if !bounded && s.waiters.Load() == 0 {
		// The default tenant's path takes no lock while no one waits
		// (one who starts waiting now is woken by the next request's
		// end, or refused at its wait's end).
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bounded {
		if s.inflight[tenant]--; s.inflight[tenant] <= 0 {
			delete(s.inflight, tenant)
		}
	}
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
}

// shouldLog says whether a postponement of tenant at now is the first in
// a minute, and so logged at Info.
func (s *tenantShare) shouldLog(tenant string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.logged[tenant]; ok && now.Sub(last) < time.Minute {
		return false
	}
	s.logged[tenant] = now
	// Forget tenants not postponed for a minute: the map holds the
	// tenants of the last minute, not every tenant ever seen.
	for t, at := range s.logged {
		if now.Sub(at) >= time.Minute {
			delete(s.logged, t)
		}
	}
	return true
}

// reservePark keeps a place for one delivery of tenant to be parked,
// within parkPerShare and parkPerSlot; false when none is left.
func (s *tenantShare) reservePark(tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[tenant] >= parkPerShare*s.max || s.heldAll >= parkPerSlot*s.slots {
		return false
	}
	s.held[tenant]++
	s.heldAll++
	return true
}

// park puts id, whose place reservePark kept, at the end of tenant's
// parked deliveries.
func (s *tenantShare) park(tenant, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parked[tenant] = append(s.parked[tenant], id)
}

// stranded says whether tenant has deliveries parked and no request in
// flight whose end would resume them. A request ending counts out before
// its goroutine unparks (give, then follow), so a tenant with one in
// flight is resumed by it; one with none only by whoever sees this.
func (s *tenantShare) stranded(tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parked[tenant]) > 0 && s.inflight[tenant] == 0
}

// unreserve gives back a place reservePark kept for a delivery that was
// not parked.
func (s *tenantShare) unreserve(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(tenant)
}

// unpark takes tenant's oldest parked delivery; "" when it has none.
func (s *tenantShare) unpark(tenant string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.parked[tenant]
	if len(q) == 0 {
		return ""
	}
	id := q[0]
	if len(q) == 1 {
		delete(s.parked, tenant) // and its array with it
	} else {
		s.parked[tenant] = q[1:]
	}
	s.dropLocked(tenant)
	return id
}

func (s *tenantShare) dropLocked(tenant string) {
	s.heldAll--
	if s.held[tenant]--; s.held[tenant] <= 0 {
		delete(s.held, tenant)
	}
}

// overShare gives back the claim of an attempt its tenant's share refused:
// parked, due now and marked queued, for follow to send as one of the
// tenant's requests ends; or, with nothing more to be parked, due
// shareWait later for a sweep. No attempt is counted either way. When
// the tenant's last request ended between the refusal and the park, no
// end is left to resume it: the outcome names the tenant (freed), and
// this goroutine's follow sends it, as a request's end would have.
func (d *Dispatcher) overShare(ctx context.Context, c claimed) (Outcome, error) {
	now := d.now()
	at := now
	var freed string
	if tenant := c.row.Tenant; d.share.reservePark(tenant) {
		if err := d.park(ctx, c.row, now); err != nil {
			d.share.unreserve(tenant)
			return Outcome{}, err
		}
		d.share.park(tenant, c.row.ID)
		if d.share.stranded(tenant) {
			freed = tenant
		}
	} else {
		at = now.Add(shareWait)
		if err := d.release(ctx, c.row, &at); err != nil {
			return Outcome{}, err
		}
	}
	if d.observer != nil {
		d.observer.Postponed("tenant_share")
	}
	if d.share.shouldLog(c.row.Tenant, now) {
		d.log.Info(fmt.Sprintf("tenant is past its share of this worker's requests (%d, worker.tenant_share of worker.concurrency) while the worker has no more than that free for other tenants: its further attempts wait, and are sent as its requests end", d.share.max),
			"tenant", c.row.Tenant, "delivery", c.row.ID, "webhook", c.row.WebhookName)
	}
	return Outcome{Status: models.StatusFailed, Postponed: true, Attempt: c.row.Attempts - 1, NextRetry: &at, freed: freed}, nil
}

// park is release for a delivery parked by its tenant's share
// (Store.Park), on a context a shutdown does not cut.
func (d *Dispatcher) park(ctx context.Context, row models.Delivery, now time.Time) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	return d.store.Park(ctx, row, now)
}
