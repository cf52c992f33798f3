package api

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
)

// Refusals are logged at WARN at most once a second, each warning counting
// the refusals since the one before, so a flood of 503s cannot flood the
// log.
func TestIntakeWarnsAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	c := clock.NewStub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in := newIntake(100, 1, c, slog.New(slog.NewTextHandler(&logs, nil)))
	r := httptest.NewRequest("POST", "/v1/events", nil)
	g, err := in.acquire(r, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := in.acquire(r, "", 1); err == nil {
			t.Fatal("a request was admitted past the budget")
		}
	}
	c.Advance(time.Second)
	if _, err := in.acquire(r, "", 1); err == nil {
		t.Fatal("a request was admitted past the budget")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "refused_since_last_warning=1 ") ||
		!strings.Contains(lines[1], "refused_since_last_warning=5 ") || !strings.Contains(lines[1], "refused_total=6") {
		t.Errorf("warnings:\n%s\nwant two: the first refusal, then the 5 since it", logs.String())
	}
	g.release()
	if g2, err := in.acquire(r, "", 100); err != nil {
		t.Errorf("the whole budget after the release: %v", err)
	} else {
		g2.release()
	}
}

// A request charged more than the whole budget still runs, alone (and its
// further charges, an evaluation, are cut to what is left: nothing); and a
// body of unknown length is charged as api.max_body_bytes.
func TestIntakeChargeOverTheBudgetRunsAlone(t *testing.T) {
	t.Parallel()
	in := newIntake(1000, 1, clock.NewStub(time.Time{}), slog.New(slog.DiscardHandler))
	r := httptest.NewRequest("POST", "/v1/webhooks", nil)
	g, err := in.acquire(r, "", 10_000)
	if err != nil {
		t.Fatalf("alone: %v", err)
	}
	if err := g.more(r, 1); err != nil || g.held != 1000 {
		t.Errorf("a request holding the whole budget charged more: %v, holding %d; want it to go on holding 1000", err, g.held)
	}
	if _, err := in.acquire(r, "", 1); err == nil {
		t.Error("a second request was admitted beside one holding the whole budget")
	}
	g.release()

	r.ContentLength = -1
	if got, want := requestCharge(r, 1<<20), int64(1<<20)*IntakeMemoryFactor; got != want {
		t.Errorf("chunked body charged %d, want %d", got, want)
	}
	r.ContentLength = 10
	if got, want := requestCharge(r, 1<<20), int64(minRequestBytes)*IntakeMemoryFactor; got != want {
		t.Errorf("10-byte body charged %d, want %d", got, want)
	}
}
