package dispatch

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/retry"
)

// decision is what follows one attempt.
type decision struct {
	status string
	next   *time.Time
	// gone is set when the receiver answered 410 Gone: the delivery is
	// final and the webhook is disabled.
	gone bool
}

// decide applies the status rules to an attempt's result: 2xx is Delivered;
// 410 Gone is Exhausted at once; a request that could not be built and a
// synchronous attempt are final; anything else is Failed with the
// schedule's next gap while the budget lasts, pushed back to honour a
// Retry-After on 429 and 503 (capped at the schedule's last entry).
func decide(s retry.Schedule, now time.Time, attempts, maxRetries int, mode Mode, res delivery.Result) decision {
	switch {
	case res.OK():
		return decision{status: models.StatusDelivered}
	case res.StatusCode == http.StatusGone:
		return decision{status: models.StatusExhausted, gone: true}
	case mode == Sync, res.Class == delivery.ClassInvalid:
		return decision{status: models.StatusExhausted}
	}
	next, ok := s.Next(now, attempts, maxRetries)
	if !ok {
		return decision{status: models.StatusExhausted}
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		if wait, ok := retryAfter(res.Header, now); ok {
			wait = min(wait, s[len(s)-1])
			if at := now.Add(wait); at.After(next) {
				next = at
			}
		}
	}
	return decision{status: models.StatusFailed, next: &next}
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
