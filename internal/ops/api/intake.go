package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/homingdev/homing/internal/lib/clock"
)

// IntakeMemoryFactor is how many bytes of live heap one request may hold per
// byte of its body while it is decoded, validated and written: the body
// read, the decoded document (a 1-byte JSON number becomes a 16-byte
// interface and an 8-byte boxed float), the outbox payload and the
// driver's copies. Measured with the collector off (every allocation
// counted as live): a 800 KB publish of small ints and a long string
// allocated 23 × its body, a 900 KB sample_doc of small ints 54 × with the
// rendering, of which the rendering's own values are charged apart
// (evaluationBytes); with the collector on, 150 such requests at once held
// about 7 × each. 24 is above the publish's total allocation.
const IntakeMemoryFactor = 24

// minRequestBytes is the least a request is charged as its body, so that a
// flood of bodiless or tiny requests is bounded too (headers, buffers,
// goroutine stacks).
const minRequestBytes = 4 << 10

// intakeRetryAfter is the Retry-After, in seconds, of a request refused
// because the budget is full: requests in flight end within seconds.
const intakeRetryAfter = 1

// DefaultTenantInflightShare is api.tenant_inflight_share's default: a
// tenant's requests in flight may hold a quarter of the intake budget.
const DefaultTenantInflightShare = 0.25

// intake is the process-wide budget of memory that requests in flight may
// hold. Every request is charged before its body is read, by its declared
// length (or api.max_body_bytes when unknown) times IntakeMemoryFactor, and
// a request that evaluates a definition is charged the evaluation's own
// value budget on top; the charge is returned when the handler returns.
// A request that does not fit is refused with 503 at once rather than
// queued, so neither the bodies nor the waiters can grow without bound, and
// the group commit of publishes holds at most what the budget admitted.
//
// A request is charged once it is authenticated, to the tenant its token
// belongs to, and a tenant's requests together hold at most share of the
// budget (api.tenant_inflight_share): one tenant's slow bodies are refused
// with 429 tenant_share_full, charged to no one, long before they could
// fill the budget every other tenant shares. A tenant's first request in
// flight always fits its share, as any request alone fits the budget.
// Operator tokens, and the pages served beside the API (together, as one
// tenant would), are charged to the budget alone.
type intake struct {
	sem   *semaphore.Weighted
	limit int64
	share int64 // what one tenant may hold
	log   *slog.Logger
	clock clock.Clock

	refused atomic.Int64 // since the process started
	held    atomic.Int64 // bytes charged to requests in flight

	mu       sync.Mutex
	lastWarn time.Time
	unlogged int64            // refusals since the last warning
	tenants  map[string]int64 // bytes each tenant's requests in flight hold
}

func newIntake(limit int64, share float64, c clock.Clock, log *slog.Logger) *intake {
	return &intake{sem: semaphore.NewWeighted(limit), limit: limit, share: max(int64(float64(limit)*share), 1),
		log: log, clock: c, tenants: map[string]int64{}}
}

// pagesTenant is the share the pages served beside the API (the console
// and the portal) hold together: they are charged before their session is
// known.
const pagesTenant = "\x00pages"

// grant is what one request holds of the intake budget.
type grant struct {
	in *intake
	// tenant is the share the request is charged to; "" is none (an
	// operator's token, or a route that needs none).
	tenant string
	held   int64
}

type grantKey struct{}

// acquire charges n bytes for a new request of tenant ("" for none), or
// returns the refusal to answer.
func (in *intake) acquire(r *http.Request, tenant string, n int64) (*grant, error) {
	g := &grant{in: in, tenant: tenant}
	if err := g.more(r, n); err != nil {
		return nil, err
	}
	return g, nil
}

// more charges n more bytes to the request's grant: a request that turns
// out to need an evaluation (a workflow_transition publish). The tenant's
// share is taken first, so that a refusal for the budget gives it back and
// a refusal for the share takes nothing of the budget.
func (g *grant) more(r *http.Request, n int64) error {
	if left := g.in.limit - g.held; n > left {
		n = left // a request alone may always run, whatever it is charged
	}
	if err := g.in.takeShare(r, g, n); err != nil {
		return err
	}
	if !g.in.sem.TryAcquire(n) {
		g.in.giveShare(g.tenant, n)
		return g.in.refuse(r, n)
	}
	g.held += n
	g.in.held.Add(n)
	return nil
}

// takeShare charges n bytes of g's request to its tenant's share, or
// refuses it when the tenant's other requests in flight leave too little.
func (in *intake) takeShare(r *http.Request, g *grant, n int64) error {
	if g.tenant == "" {
		return nil
	}
	in.mu.Lock()
	held := in.tenants[g.tenant]
	if others := held - g.held; others > 0 && held+n > in.share {
		in.mu.Unlock()
		return in.refuseShare(r, g.tenant, n)
	}
	in.tenants[g.tenant] = held + n
	in.mu.Unlock()
	return nil
}

// giveShare returns n bytes of tenant's share.
func (in *intake) giveShare(tenant string, n int64) {
	if tenant == "" || n == 0 {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.tenants[tenant] -= n; in.tenants[tenant] <= 0 {
		delete(in.tenants, tenant)
	}
}

// release returns everything the request held.
func (g *grant) release() {
	if g.held > 0 {
		g.in.giveShare(g.tenant, g.held)
		g.in.held.Add(-g.held)
		g.in.sem.Release(g.held)
		g.held = 0
	}
}

// refuse counts a refusal for the whole budget, warns at most once a
// second, and returns the 503 unavailable the client gets.
func (in *intake) refuse(r *http.Request, n int64) error {
	in.warn(r, n, "api request refused with 503: requests in flight hold the whole intake budget (api.max_inflight_bytes)")
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: intakeRetryAfter,
		Message: "the server is holding as many requests as its memory allows (api.max_inflight_bytes); try again shortly"}
}

// refuseShare counts a refusal for a tenant's share, warns at most once a
// second, and returns the 429 tenant_share_full the client gets.
func (in *intake) refuseShare(r *http.Request, tenant string, n int64) error {
	name := tenant
	if tenant == pagesTenant {
		name = "console and portal pages"
	}
	in.warn(r, n, "api request refused with 429: the tenant's requests in flight hold its share of the intake budget (api.tenant_inflight_share)",
		"tenant", name, "share_bytes", in.share)
	if tenant == pagesTenant {
		return &Error{Status: http.StatusTooManyRequests, Code: CodeTenantShareFull, RetryAfter: intakeRetryAfter,
			Message: "the console's and the portal's requests in flight hold their share of the server's memory (api.tenant_inflight_share of api.max_inflight_bytes); try again shortly"}
	}
	return &Error{Status: http.StatusTooManyRequests, Code: CodeTenantShareFull, RetryAfter: intakeRetryAfter,
		Message: fmt.Sprintf("tenant %q's requests in flight hold its share of the server's memory (api.tenant_inflight_share of api.max_inflight_bytes): finish or cancel them, or send fewer at once, and retry after Retry-After", tenant)}
}

// warn counts a refusal and logs it at most once a second, with how many
// were refused since the last warning.
func (in *intake) warn(r *http.Request, n int64, msg string, attrs ...any) {
	total := in.refused.Add(1)
	in.mu.Lock()
	in.unlogged++
	now := in.clock.Now()
	warn := now.Sub(in.lastWarn) >= time.Second
	var count int64
	if warn {
		in.lastWarn, count, in.unlogged = now, in.unlogged, 0
	}
	in.mu.Unlock()
	if warn {
		in.log.Warn(msg, append([]any{"method", r.Method, "path", r.URL.Path, "charge_bytes", n, "max_inflight_bytes", in.limit,
			"refused_since_last_warning", count, "refused_total", total}, attrs...)...)
	}
}

// requestCharge is what a request is charged before its body is read.
func requestCharge(r *http.Request, maxBody int64) int64 {
	n := r.ContentLength
	if n < 0 || n > maxBody { // unknown (chunked); a larger one is refused anyway
		n = maxBody
	}
	return max(n, minRequestBytes) * IntakeMemoryFactor
}

// chargeMore charges n more bytes to r's grant, if the API holds one.
func chargeMore(ctx context.Context, r *http.Request, n int64) error {
	if g, ok := ctx.Value(grantKey{}).(*grant); ok {
		return g.more(r, n)
	}
	return nil
}
