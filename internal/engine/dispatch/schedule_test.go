package dispatch

import (
	"testing"
	"time"
)

func TestDelayClampsAtLastEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 5 * time.Minute},
		{1, 5 * time.Minute},
		{2, 30 * time.Minute},
		{3, 2 * time.Hour},
		{4, 5 * time.Hour},
		{5, 10 * time.Hour},
		{6, 10 * time.Hour},
		{7, 10 * time.Hour},
		{8, 10 * time.Hour},
	}
	for _, tt := range tests {
		if got := DefaultSchedule.Delay(tt.attempt); got != tt.want {
			t.Errorf("Delay(%d) = %s, want %s", tt.attempt, got, tt.want)
		}
	}
}

func TestNextDefaultBudgetTriesAtZero5m35m2h35m(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	var tried []time.Duration
	for attempts := 1; ; attempts++ {
		tried = append(tried, now.Sub(start))
		next, ok := DefaultSchedule.Next(now, attempts, DefaultMaxRetries)
		if !ok {
			break
		}
		now = next
	}
	want := []time.Duration{0, 5 * time.Minute, 35 * time.Minute, 2*time.Hour + 35*time.Minute}
	if len(tried) != len(want) {
		t.Fatalf("tried at %v, want %v", tried, want)
	}
	for i := range want {
		if tried[i] != want[i] {
			t.Fatalf("tried at %v, want %v", tried, want)
		}
	}
}

func TestNextBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		attempts   int
		maxRetries int
		wantOK     bool
		wantDelay  time.Duration
	}{
		{"max 0: first attempt is final", 1, 0, false, 0},
		{"max 1: first failure retried", 1, 1, true, 5 * time.Minute},
		{"max 1: second failure final", 2, 1, false, 0},
		{"max 3: third failure retried", 3, 3, true, 2 * time.Hour},
		{"max 3: fourth failure final", 4, 3, false, 0},
		{"max 10: eighth failure clamps at 10h", 8, 10, true, 10 * time.Hour},
	}
	for _, tt := range tests {
		got, ok := DefaultSchedule.Next(now, tt.attempts, tt.maxRetries)
		if ok != tt.wantOK {
			t.Errorf("%s: ok = %v, want %v", tt.name, ok, tt.wantOK)
			continue
		}
		if ok && got.Sub(now) != tt.wantDelay {
			t.Errorf("%s: delay = %s, want %s", tt.name, got.Sub(now), tt.wantDelay)
		}
		if !ok && !got.IsZero() {
			t.Errorf("%s: exhausted but next = %s", tt.name, got)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := (Schedule{}).Validate(); err == nil {
		t.Error("empty schedule accepted")
	}
	if err := (Schedule{time.Minute, 0}).Validate(); err == nil {
		t.Error("zero gap accepted")
	}
	if err := DefaultSchedule.Validate(); err != nil {
		t.Errorf("default schedule refused: %v", err)
	}
}
