package dispatch

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/models"
)

// decision is what follows one attempt.
type decision struct {
	status string
	next   *time.Time
	// gone is set when the receiver answered 410 Gone: the delivery is
	// final and the webhook is disabled.
	gone bool
	// reason is why the delivery has status (models.Reasons).
	reason string
}

// decide applies the status rules to an attempt's result: 2xx is Delivered;
// 410 Gone is Exhausted at once; a request that could not be built and a
// synchronous attempt are final; anything else is Failed with the
// schedule's next gap while the budget lasts, pushed back to honour a
// Retry-After on 429 and 503 (capped at the schedule's last entry).
func decide(s Schedule, now time.Time, attempts, maxRetries int, mode Mode, res send.Result) decision {
	switch {
	case res.OK():
		return decision{status: models.StatusDelivered, reason: models.ReasonAccepted}
	case res.StatusCode == http.StatusGone:
		return decision{status: models.StatusExhausted, gone: true, reason: models.ReasonGone}
	case res.Class == send.ClassInvalid:
		return decision{status: models.StatusExhausted, reason: models.ReasonUnbuildable}
	case mode == Sync:
		return decision{status: models.StatusExhausted, reason: models.ReasonSynchronous}
	}
	next, ok := s.Next(now, attempts, maxRetries)
	if !ok {
		return decision{status: models.StatusExhausted, reason: models.ReasonRetriesSpent}
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		if wait, ok := retryAfter(res.Header, now); ok {
			wait = min(wait, s[len(s)-1])
			if at := now.Add(wait); at.After(next) {
				next = at
			}
		}
	}
	return decision{status: models.StatusFailed, next: &next, reason: models.ReasonRetrying}
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(365*24*3600))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// refusalKind is why a claim took nothing.
type refusalKind int

const (
	refusedTaken           refusalKind = iota // claimable when read, taken by another attempt since
	refusedMissing                            // no such delivery
	refusedState                              // not in a state this attempt may take
	refusedWebhookDeleted                     // claimable, but its webhook is gone: abandon
	refusedWebhookDisabled                    // claimable, but its webhook is disabled: abandon
	refusedHeld                               // a retry held back while its webhook is failing
	refusedTenantDisabled                     // claimable, but its tenant is disabled: held until enabled
	refusedOrdered                            // claimable, but held behind an earlier delivery of its document (ordering)
)

// refusal tells why a claim of mode at now took nothing, from what it saw.
// The order matters: a delivery not claimable is never abandoned, a
// disabled webhook's delivery is abandoned rather than held (its tenant
// being disabled too changes nothing: no request is made either way), and
// a disabled tenant's is held whatever its webhook's health. A retry held
// while its webhook is failing is that before it is held by the ordering
// rule (the store reads the order last): either way it waits.
func refusal(c storage.Claim, mode Mode, now time.Time) refusalKind {
	switch {
	case !c.Found:
		return refusedMissing
	case !storage.Claimable(c.Row, mode, now):
		return refusedState
	case c.Hook == nil:
		return refusedWebhookDeleted
	case !c.Hook.Enabled:
		return refusedWebhookDisabled
	case c.TenantDisabled:
		return refusedTenantDisabled
	case storage.Held(c.Health, c.Row.ID, mode):
		return refusedHeld
	case c.Blocked && mode != Sync:
		return refusedOrdered
	}
	return refusedTaken
}

// RecordMargin is how much of a claim's lease must be left, beyond the
// request's own timeout, when the request goes out: the time to record its
// outcome before the lease ends. It is less than storage.LeaseMargin, so a
// fresh claim may always send; what eats into the difference is time
// between the claim and the request (an inline attempt waits for the
// outbox release and the event's other enqueues).
const RecordMargin = 30 * time.Second

// leaseAllows reports whether an attempt claimed until lease may still
// send its request at now. Once the lease ends, the sweeper finds the row
// due and a retry claims it and sends: a request whose timeout and
// recording could run past the lease would make that delivery twice. A
// claim without a lease (Sync: no sweep ever takes the row) is always
// allowed.
func leaseAllows(lease *time.Time, now time.Time, timeout time.Duration) bool {
	return lease == nil || lease.Sub(now) >= timeout+RecordMargin
}

// SlowFinalRetries is the retry count of an event's task
// (asynq.GetRetryCount: 0 on its first run) from which a webhook whose
// definition reached its wall-clock time limit at fan-out is Exhausted for
// that event. Before it, the stop is taken for load on this worker (time is
// not the definition's alone, unlike steps and bytes): nothing is written
// and the task runs again. With the worker's retry delays (2 s, 4 s, 8 s …)
// five re-runs ride out about a minute of load; a definition that is slow
// on its own holds back the event's other webhooks no longer than that.
const SlowFinalRetries = 5

// stopAction is what fan-out does with one webhook's evaluation error.
type stopAction int

const (
	// stopExhaust writes the webhook's row Exhausted with the reason, for
	// good: the definition cannot make this event's request.
	stopExhaust stopAction = iota
	// stopRetryEvent writes nothing for the whole event and fails its
	// task, to be run again: the stop is no verdict on the definition.
	stopRetryEvent
)

// onStop decides what an evaluation error of one webhook does at fan-out
// on the event task's retries-th re-run. The process's heap ceiling
// (budget.ErrOverloaded) is never the webhook's fault; the time limit
// (budget.ErrTimeLimit) is taken for load until SlowFinalRetries; every
// other error (steps, bytes, a bad template) is the definition's.
func onStop(err error, retries int) stopAction {
	switch {
	case errors.Is(err, budget.ErrOverloaded):
		return stopRetryEvent
	case errors.Is(err, budget.ErrTimeLimit) && retries < SlowFinalRetries:
		return stopRetryEvent
	}
	return stopExhaust
}
