package models

import (
	"testing"
	"time"
)

// TestHealthState is the one naming of a webhook's health that every view
// and the operational events use.
func TestHealthState(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    WebhookHealth
		want string
	}{
		{WebhookHealth{}, HealthHealthy},
		{WebhookHealth{FailingSince: &since, Failures: 1}, HealthDegraded},
		{WebhookHealth{FailingSince: &since, Failures: FailingAfter - 1}, HealthDegraded},
		{WebhookHealth{FailingSince: &since, Failures: FailingAfter}, HealthFailing},
		{WebhookHealth{FailingSince: &since, Failures: 100}, HealthFailing},
	} {
		if got := c.h.State(); got != c.want {
			t.Errorf("%d failures: %s, want %s", c.h.Failures, got, c.want)
		}
		if got := c.h.StateOf(true); got != c.want {
			t.Errorf("%d failures, enabled: %s, want %s", c.h.Failures, got, c.want)
		}
		if got := c.h.StateOf(false); got != HealthDisabled {
			t.Errorf("%d failures, disabled: %s, want %s", c.h.Failures, got, HealthDisabled)
		}
	}
}
