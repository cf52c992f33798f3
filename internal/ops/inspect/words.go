package inspect

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/homingdev/homing/models"
)

// Why a Failed delivery that is due does not go out now (Standing.Held).
const (
	// HeldTenant: its tenant is disabled; it goes out once the tenant is
	// enabled again.
	HeldTenant = "tenant"
	// HeldProbe: its webhook is failing, and its retries wait behind one
	// probe at a time; the first success releases them.
	HeldProbe = "probe"
	// HeldOrder: its webhook is ordered by document, and an earlier
	// delivery of its document is not final yet (Detail.WaitsFor).
	HeldOrder = "order"
)

// Standing is what the words of a delivery's state are made of: its row,
// and what holds it back when something does.
type Standing struct {
	Status string
	// Attempts made, and MaxRetries as the row holds it: the delivery may
	// make MaxRetries+1 attempts in all (Delivery.AttemptsText).
	Attempts, MaxRetries int
	NextRetry            *time.Time
	LastStatusCode       *int
	LastError            string
	// Held is HeldTenant, HeldProbe, HeldOrder or "" (nothing holds it
	// back).
	Held string
}

// StandingOf is d's standing, held by held ("" for nothing).
func StandingOf(d Delivery, held string) Standing {
	return Standing{Status: d.Status, Attempts: d.Attempts, MaxRetries: d.MaxRetries, NextRetry: d.NextRetry,
		LastStatusCode: d.LastStatusCode, LastError: d.LastError, Held: held}
}

// Words says a delivery's state as a person reads it, as of now: "Retrying:
// attempt 2 of 4 in 4 min", "Delivered", "Gave up after 4 attempts". Every
// page a person reads (the console and the portal) shows these; the API
// keeps the status names (Delivered, Failed, Exhausted), which are what a
// program compares. A pure function of the row and the clock, so one table
// test holds every case.
func Words(s Standing, now time.Time) string {
	switch s.Status {
	case models.StatusDelivered:
		return "Delivered"
	case models.StatusExhausted:
		return exhaustedWords(s)
	case models.StatusFailed:
		return failedWords(s, now)
	}
	return s.Status
}

// exhaustedWords: why nothing more will be tried.
func exhaustedWords(s Standing) string {
	switch {
	case strings.HasPrefix(s.LastError, "webhook disabled"):
		return "Stopped: the endpoint was disabled"
	case strings.HasPrefix(s.LastError, "webhook deleted"):
		return "Stopped: the endpoint was deleted"
	case s.LastStatusCode != nil && *s.LastStatusCode == http.StatusGone:
		return "Gave up: the endpoint answered 410 Gone"
	case s.Attempts == 0:
		return "Not sent: the request could not be made"
	case s.Attempts == 1:
		return "Gave up after 1 attempt"
	}
	return fmt.Sprintf("Gave up after %d attempts", s.Attempts)
}

// failedWords: which attempt comes next, and when.
func failedWords(s Standing, now time.Time) string {
	next := fmt.Sprintf("attempt %d of %d", s.Attempts+1, max(s.MaxRetries+1, s.Attempts+1))
	due := s.NextRetry == nil || !s.NextRetry.After(now)
	switch {
	case s.Held == HeldTenant:
		return "Paused: " + next + " waits until sending is resumed for this account"
	case s.Held == HeldOrder:
		verb := "Waiting: attempt " + fmt.Sprint(s.Attempts+1)
		if s.Attempts == 0 {
			verb = "Waiting: the first attempt"
		}
		return verb + " goes out once the delivery before it of this document is delivered or given up"
	case s.Held == HeldProbe && due:
		return "Waiting: the endpoint keeps failing; " + next + " goes out once a test request to it succeeds"
	}
	verb := "Retrying: "
	if s.Attempts == 0 {
		verb, next = "Sending: ", "first attempt"
	}
	if due {
		return verb + next + " now"
	}
	return verb + next + " " + In(s.NextRetry.Sub(now))
}

// In says a wait ahead in words: "in 30 s", "in 4 min", "in 2 h 5 min",
// "in 3 days 4 h", in whole units, rounded down as the pages' relative
// times are ("in 4m" beside it), never below "in 1 s".
func In(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("in %d s", max(int(d/time.Second), 1))
	}
	m := int(d / time.Minute)
	switch {
	case m < 60:
		return fmt.Sprintf("in %d min", m)
	case m < 24*60:
		if m%60 == 0 {
			return fmt.Sprintf("in %d h", m/60)
		}
		return fmt.Sprintf("in %d h %d min", m/60, m%60)
	}
	days, h := m/(24*60), m%(24*60)/60
	unit := "days"
	if days == 1 {
		unit = "day"
	}
	if h == 0 {
		return fmt.Sprintf("in %d %s", days, unit)
	}
	return fmt.Sprintf("in %d %s %d h", days, unit, h)
}

// StatusWord names a status as a person reads it where one word stands for
// many deliveries (a count's column, a filter's choice): Failed is
// "Retrying", since a Failed delivery always has an attempt scheduled, and
// Exhausted is "Given up".
func StatusWord(status string) string {
	switch status {
	case models.StatusFailed:
		return "Retrying"
	case models.StatusExhausted:
		return "Given up"
	}
	return status
}
