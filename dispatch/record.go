package dispatch

import "time"

// outcomeRow is the delivery's new state after an attempt.
type outcomeRow struct {
	status       string
	next         *time.Time
	code         *int
	lastError    string
	lastResponse string
	method, url  string
	at           time.Time
}
