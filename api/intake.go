package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/homingdev/homing/clock"
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

// intake is the process-wide budget of memory that requests in flight may
// hold. Every request is charged before its body is read, by its declared
// length (or api.max_body_bytes when unknown) times IntakeMemoryFactor, and
// a request that evaluates a definition is charged the evaluation's own
// value budget on top; the charge is returned when the handler returns.
// A request that does not fit is refused with 503 at once rather than
// queued, so neither the bodies nor the waiters can grow without bound, and
// the group commit of publishes holds at most what the budget admitted.
type intake struct {
	sem   *semaphore.Weighted
	limit int64
	log   *slog.Logger
	clock clock.Clock

	refused atomic.Int64 // since the process started
	held    atomic.Int64 // bytes charged to requests in flight

	mu       sync.Mutex
	lastWarn time.Time
	unlogged int64 // refusals since the last warning
}

func newIntake(limit int64, c clock.Clock, log *slog.Logger) *intake {
	return &intake{sem: semaphore.NewWeighted(limit), limit: limit, log: log, clock: c}
}

// grant is what one request holds of the intake budget.
type grant struct {
	in   *intake
	held int64
}

type grantKey struct{}

// acquire charges n bytes for a new request, or returns the 503 to answer.
func (in *intake) acquire(r *http.Request, n int64) (*grant, error) {
	g := &grant{in: in}
	if err := g.more(r, n); err != nil {
		return nil, err
	}
	return g, nil
}

// more charges n more bytes to the request's grant: a request that turns
// out to need an evaluation (a workflow_transition publish).
func (g *grant) more(r *http.Request, n int64) error {
	if left := g.in.limit - g.held; n > left {
		n = left // a request alone may always run, whatever it is charged
	}
	if !g.in.sem.TryAcquire(n) {
		return g.in.refuse(r, n)
	}
	g.held += n
	g.in.held.Add(n)
	return nil
}

// release returns everything the request held.
func (g *grant) release() {
	if g.held > 0 {
		g.in.held.Add(-g.held)
		g.in.sem.Release(g.held)
		g.held = 0
	}
}

// refuse counts a refusal, warns at most once a second, and returns the
// 503 unavailable the client gets.
func (in *intake) refuse(r *http.Request, n int64) error {
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
		in.log.Warn("api request refused with 503: requests in flight hold the whole intake budget (api.max_inflight_bytes)",
			"method", r.Method, "path", r.URL.Path, "charge_bytes", n, "max_inflight_bytes", in.limit,
			"refused_since_last_warning", count, "refused_total", total)
	}
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: intakeRetryAfter,
		Message: "the server is holding as many requests as its memory allows (api.max_inflight_bytes); try again shortly"}
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
