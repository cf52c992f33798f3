package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/webhook"
)

// A webhook's health line counts as a person writes it: one failure, one
// due retry; two failures, two due retries.
func TestHealthLineCountsInWords(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    webhook.Health
		want string
	}{
		{webhook.Health{State: webhook.HealthDegraded, FailingSince: &since, Failures: 1}, "(1 failure since the last success;"},
		{webhook.Health{State: webhook.HealthDegraded, FailingSince: &since, Failures: 2}, "(2 failures since the last success;"},
		{webhook.Health{State: webhook.HealthFailing, FailingSince: &since, Failures: 5, HeldBack: 1}, "(5 failures), no probe yet, 1 due retry held back"},
		{webhook.Health{State: webhook.HealthFailing, FailingSince: &since, Failures: 5, HeldBack: 2}, "(5 failures), no probe yet, 2 due retries held back"},
	} {
		if got := healthLine(c.h); !strings.Contains(got, c.want) {
			t.Errorf("healthLine(%+v) = %q, want it to say %q", c.h, got, c.want)
		}
	}
}
