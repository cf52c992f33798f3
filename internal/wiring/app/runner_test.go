package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// journalPart records its starts and stops in a shared journal.
type journalPart struct {
	name     string
	journal  *[]string
	mu       *sync.Mutex
	startErr error
	stopErr  error
}

func (p journalPart) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.journal = append(*p.journal, "start "+p.name)
	return p.startErr
}

func (p journalPart) Stop(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.journal = append(*p.journal, "stop "+p.name)
	return p.stopErr
}

func TestRunnerStartsInOrderAndStopsInReverse(t *testing.T) {
	boom, stuck := errors.New("port in use"), errors.New("stuck")
	for _, tc := range []struct {
		name    string
		failing map[string]error // part → start error
		stopErr map[string]error
		want    []string
		wantErr error
	}{
		{name: "all start", want: []string{"start relay", "start api", "ready", "stopping", "stop api", "stop relay"}},
		{name: "the second cannot start", failing: map[string]error{"api": boom},
			want: []string{"start relay", "start api", "stop relay"}, wantErr: boom},
		{name: "a stop fails, the others still stop", stopErr: map[string]error{"api": stuck},
			want: []string{"start relay", "start api", "ready", "stopping", "stop api", "stop relay"}, wantErr: stuck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				journal []string
			)
			note := func(s string) { mu.Lock(); journal = append(journal, s); mu.Unlock() }
			r := &Runner{Stopping: func() { note("stopping") }}
			for _, n := range []string{"relay", "api"} {
				r.Add(n, journalPart{name: n, journal: &journal, mu: &mu, startErr: tc.failing[n], stopErr: tc.stopErr[n]})
			}
			ctx, cancel := context.WithCancel(context.Background())
			err := r.Run(ctx, func() { note("ready"); cancel() })
			cancel()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Run returned %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(journal, tc.want) {
				t.Fatalf("journal %q, want %q", journal, tc.want)
			}
			var se *StartError
			if tc.failing != nil && (!errors.As(err, &se) || se.Part != "api") {
				t.Fatalf("start error %v does not name the part", err)
			}
		})
	}
}

// budgetPart's Stop takes the whole stop budget (a server whose requests
// wait on a database that is gone).
type budgetPart struct{}

func (budgetPart) Start(context.Context) error { return nil }
func (budgetPart) Stop(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// promptPart stops at once when asked, but only on a live context (a
// relay told to stop waits for its loop to return).
type promptPart struct{}

func (promptPart) Start(context.Context) error    { return nil }
func (promptPart) Stop(ctx context.Context) error { return ctx.Err() }

// A part reached after an earlier one spent StopTimeout still gets
// StopGrace: only the part that took the budget is reported (homing serve
// exited 1 naming its relay and database watcher too, seen in the
// PostgreSQL failover test, when its API waited on a lost database).
func TestRunnerGivesPartsAfterASpentBudgetTheirGrace(t *testing.T) {
	r := &Runner{StopTimeout: time.Millisecond}
	r.Add("relay", promptPart{})
	r.Add("api", budgetPart{})
	ctx, cancel := context.WithCancel(context.Background())
	err := r.Run(ctx, cancel)
	if err == nil || !strings.Contains(err.Error(), "stop api") || strings.Contains(err.Error(), "stop relay") {
		t.Fatalf("Run returned %v, want the api's stop only", err)
	}
}
