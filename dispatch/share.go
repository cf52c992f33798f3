package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/homingdev/homing/models"
)

// tenantShare bounds the requests one tenant has at its receivers at once
// in this process (Config.TenantRequests: worker.tenant_share of
// worker.concurrency), so that a tenant whose receivers never answer, each
// holding a worker slot for its webhook's timeout (up to 5 minutes),
// cannot hold every slot of a queue it shares with other tenants and hold
// up their first attempts. The default tenant, the operator's own, has no
// bound: an install without tenants runs as it did.
//
// An attempt over its tenant's share makes no request: its claim is given
// back with the row due shareWait later (no attempt counted, no slot held
// while it waits; a sweep queues it again), as the rate limit does.
type tenantShare struct {
	max int // requests in flight per tenant; 0 is no bound
	mu  sync.Mutex
	// inflight counts each bounded tenant's requests in flight.
	inflight map[string]int
	// logged is when each tenant's last postponement was logged at Info
	// (once a minute per tenant; every one is counted in
	// homing_postponed_total{reason="tenant_share"}).
	logged map[string]time.Time
}

// shareWait is how long an attempt over its tenant's share waits before a
// sweep queues it again.
const shareWait = time.Second

func newTenantShare(max int) *tenantShare {
	return &tenantShare{max: max, inflight: map[string]int{}, logged: map[string]time.Time{}}
}

// take counts one request of tenant in flight and says true, or says false
// when tenant already has its share in flight (and counts nothing).
func (s *tenantShare) take(tenant string) bool {
	if s.max <= 0 || tenant == "" || tenant == models.DefaultTenant {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[tenant] >= s.max {
		return false
	}
	s.inflight[tenant]++
	return true
}

// give ends one request of tenant that take counted.
func (s *tenantShare) give(tenant string) {
	if s.max <= 0 || tenant == "" || tenant == models.DefaultTenant {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[tenant]--; s.inflight[tenant] <= 0 {
		delete(s.inflight, tenant)
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

// overShare gives back the claim of an attempt whose tenant has its share
// of requests in flight: the row is due shareWait later, no attempt
// counted.
func (d *Dispatcher) overShare(ctx context.Context, c claimed) (Outcome, error) {
	now := d.now()
	at := now.Add(shareWait)
	if err := d.release(ctx, c.row, &at); err != nil {
		return Outcome{}, err
	}
	if d.observer != nil {
		d.observer.Postponed("tenant_share")
	}
	if d.share.shouldLog(c.row.Tenant, now) {
		d.log.Info(fmt.Sprintf("tenant has its share of this worker's requests in flight (%d, worker.tenant_share of worker.concurrency): its further attempts wait, and are sent as its requests end", d.share.max),
			"tenant", c.row.Tenant, "delivery", c.row.ID, "webhook", c.row.WebhookName)
	}
	return Outcome{Status: models.StatusFailed, Postponed: true, Attempt: c.row.Attempts - 1, NextRetry: &at}, nil
}
