package dispatch

// The retry schedule as a pure function: which gap follows which failed
// attempt, and when a delivery has used up its budget (decide reads it).

import (
	"fmt"
	"time"
)

// DefaultSchedule is Svix's hand-picked schedule minus its 5 second entry:
// most outages are over in minutes, the ones that are not last hours.
var DefaultSchedule = Schedule{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// DefaultMaxRetries is the retry budget of a webhook that does not set one.
const DefaultMaxRetries = 3

// Schedule lists the gaps between attempts: entry i follows failed attempt i+1.
// A budget longer than the schedule keeps using the last entry.
type Schedule []time.Duration

// Validate reports an empty schedule or a non-positive gap.
func (s Schedule) Validate() error {
	if len(s) == 0 {
		return fmt.Errorf("retry schedule is empty: give at least one gap such as 5m")
	}
	for i, d := range s {
		if d <= 0 {
			return fmt.Errorf("retry schedule entry %d is %s: gaps must be positive", i+1, d)
		}
	}
	return nil
}

// Delay is the gap after failed attempt number attempt (1-based), clamped at
// the schedule's last entry.
func (s Schedule) Delay(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	return s[min(attempt-1, len(s)-1)]
}

// Next decides what follows a failed attempt. attempts counts the attempts
// made so far, including the one that just failed; maxRetries is the number of
// retries allowed after the first attempt. It returns the time of the next
// attempt and true, or the zero time and false when the delivery is exhausted.
func (s Schedule) Next(now time.Time, attempts, maxRetries int) (time.Time, bool) {
	if attempts > maxRetries {
		return time.Time{}, false
	}
	return now.Add(s.Delay(attempts)), true
}
