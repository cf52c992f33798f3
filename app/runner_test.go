package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
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
