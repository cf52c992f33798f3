package sweeper_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/sweeper"
	"github.com/homingdev/homing/tasks"
)

// The gap after a probe is the time failing at that probe plus the first
// gap, capped at health.probe_interval: probes chosen as the webhook starts
// failing go out 1, 2, 4, 8 s apart, then every probe_interval.
func TestProbeGap(t *testing.T) {
	t.Parallel()
	const max = 10 * time.Second
	for _, c := range []struct {
		name    string
		failing time.Duration // probe_at - failing_since
		max     time.Duration
		want    time.Duration
	}{
		{"first probe as the webhook turns failing", 0, max, time.Second},
		{"after 1s failing", time.Second, max, 2 * time.Second},
		{"after 3s failing", 3 * time.Second, max, 4 * time.Second},
		{"after 7s failing", 7 * time.Second, max, 8 * time.Second},
		{"after 15s failing: capped", 15 * time.Second, max, max},
		{"exactly at the cap", 9 * time.Second, max, max},
		{"a long outage", 5 * time.Hour, max, max},
		{"half a second failing", 500 * time.Millisecond, max, 1500 * time.Millisecond},
		{"failing_since after probe_at (two clocks)", -3 * time.Second, max, time.Second},
		{"a cap below the first gap", 0, 500 * time.Millisecond, 500 * time.Millisecond},
	} {
		probeAt := t0.Add(time.Hour)
		if got := sweeper.ProbeGap(probeAt.Add(-c.failing), probeAt, c.max); got != c.want {
			t.Errorf("%s: gap %s, want %s", c.name, got, c.want)
		}
	}
}

// The gap is counted from the probe before it: a webhook that has never been
// probed may be at once, and one without failing_since waits the first gap.
func TestProbeDue(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	const max = 10 * time.Second
	for _, c := range []struct {
		name string
		h    models.WebhookHealth
		now  time.Duration
		want bool
	}{
		{"no probe yet", models.WebhookHealth{FailingSince: at(0)}, 0, true},
		{"1s after the first probe", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(0)}, time.Second, true},
		{"just before", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(0)}, 999 * time.Millisecond, false},
		{"4s gap after 3s failing", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(3 * time.Second)}, 7 * time.Second, true},
		{"4s gap, 1ms short", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(3 * time.Second)}, 7*time.Second - time.Millisecond, false},
		{"capped", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(time.Minute)}, time.Minute + max, true},
		{"capped, 1ms short", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(time.Minute)}, time.Minute + max - time.Millisecond, false},
		{"no failing_since", models.WebhookHealth{ProbeAt: at(time.Minute)}, time.Minute + time.Second, true},
	} {
		if got := sweeper.ProbeDue(c.h, t0.Add(c.now), max); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

// setProbe sets webhook's health: failing since failingSince (nil: unset),
// its last probe at probeAt (nil: none).
func (b *bed) setProbe(webhook string, failingSince, probeAt *time.Time) {
	b.t.Helper()
	if err := b.db.Model(&models.WebhookHealth{}).Where("webhook_id = ?", webhook).
		Updates(map[string]any{"failures": models.FailingAfter, "failing_since": failingSince, "probe_at": probeAt}).Error; err != nil {
		b.t.Fatal(err)
	}
}

// A failing webhook's probes back off: the first as it starts failing, then
// 1, 2, 4, 8 s apart, then every probe_interval (10 s); none a millisecond
// early. Each is the oldest row not yet probed.
func TestFailingWebhookProbesBackOff(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50, ProbeInterval: 10 * time.Second})
			b.webhook("dead", 0)
			ids := b.due("dead", 100, t0.Add(-time.Hour))
			b.setHealth("dead", models.FailingAfter) // failing since t0
			if res := b.step(); res.Probes != 1 || res.Enqueued != 1 {
				t.Fatalf("first step %+v, want the first probe at once", res)
			}
			var gaps []time.Duration
			for i := 1; i <= 6; i++ {
				var waited time.Duration
				for {
					b.clock.Advance(100 * time.Millisecond)
					waited += 100 * time.Millisecond
					res := b.step()
					if res.Probes == 1 && res.Due == 1 {
						break
					}
					if res.Due != 0 || waited > time.Minute {
						t.Fatalf("step %+v after %s, want nothing until the next probe", res, waited)
					}
				}
				gaps = append(gaps, waited)
				if h := b.health("dead"); h.ProbeID == nil || *h.ProbeID != ids[i] || !b.queued()[ids[i]] {
					t.Fatalf("probe %d is %v, want the oldest row not probed yet %s, queued", i+1, h.ProbeID, ids[i])
				}
			}
			want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
			if fmt.Sprint(gaps) != fmt.Sprint(want) {
				t.Fatalf("gaps between probes %v, want %v", gaps, want)
			}
			// Healthy again (a success cleared it): the rest go.
			b.setHealth("dead", 0)
			total := 0
			for range 10 {
				total += b.step().Enqueued
			}
			if total != 93 || len(b.queued()) != 100 {
				t.Fatalf("after recovery %d queued (%d in asynq), want the other 93", total, len(b.queued()))
			}
		})
	}
}

// The SQL of each dialect chooses a probe exactly when ProbeDue says so,
// over a grid of times failing and times since the last probe around each
// boundary (the first gap, a doubled gap, the cap), with failing_since
// unset and after probe_at: one webhook a case, one step.
func TestProbeRuleInSQLMatchesGo(t *testing.T) {
	t.Parallel()
	const max = 10 * time.Second
	ms := time.Millisecond
	type probeCase struct {
		name         string
		failingSince *time.Time
		probeAt      *time.Time
	}
	now := t0.Add(time.Hour)
	at := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	var cases []probeCase
	for _, since := range []time.Duration{0, 999 * ms, time.Second, 1001 * ms, 1500 * ms, 2 * time.Second, 3999 * ms, 4 * time.Second, 9999 * ms, max, 10001 * ms, time.Minute} {
		for _, failing := range []time.Duration{-2 * time.Second, 0, 500 * ms, 999 * ms, time.Second, 3 * time.Second, 8999 * ms, 9 * time.Second, 9001 * ms, time.Hour} {
			cases = append(cases, probeCase{fmt.Sprintf("p%d-f%d", since/ms, failing/ms), at(since + failing), at(since)})
		}
		cases = append(cases, probeCase{fmt.Sprintf("p%d-nofs", since/ms), nil, at(since)})
	}
	cases = append(cases, probeCase{"noprobe", at(time.Second), nil})
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 1000, ProbeInterval: max})
			b.clock.Set(now)
			for _, c := range cases {
				b.webhook(c.name, 0)
				b.due(c.name, 1, t0)
				b.setProbe(c.name, c.failingSince, c.probeAt)
			}
			b.step()
			queued := b.queued()
			var agree int
			for i, c := range cases {
				h := models.WebhookHealth{FailingSince: c.failingSince, ProbeAt: c.probeAt}
				want := sweeper.ProbeDue(h, now, max)
				got := queued[fmt.Sprintf("%s-%05d", c.name, i+1)]
				if got != want {
					t.Errorf("%s (failing since %v, probe at %v, now %v): SQL probes %v, ProbeDue %v", c.name, c.failingSince, c.probeAt, now, got, want)
				} else {
					agree++
				}
			}
			if agree != len(cases) {
				t.Fatalf("%d of %d cases agree", agree, len(cases))
			}
		})
	}
}

// Two schedulers sweeping at once choose one probe between them: the
// choice re-checks the rule on the row it writes, and a probe just chosen
// is not due again for the first gap.
func TestTwoSweepsChooseOneProbe(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50})
			b.webhook("dead", 0)
			b.due("dead", 100, t0.Add(-time.Hour))
			b.setHealth("dead", models.FailingAfter)
			client := asynq.NewClient(b.opt)
			t.Cleanup(func() { _ = client.Close() })
			sweeps := []*sweeper.Sweeper{b.s}
			for range 3 {
				sweeps = append(sweeps, sweeper.New(b.db, client, b.insp, sweeper.Config{BatchSize: 50,
					Clock: b.clock, NewTask: tasks.NewRetryTask, TaskID: tasks.RetryTaskID}))
			}
			for round := range 5 {
				var (
					wg     sync.WaitGroup
					mu     sync.Mutex
					probes int
				)
				for _, s := range sweeps {
					wg.Go(func() {
						res, err := s.RunOnce(context.Background())
						if err != nil {
							t.Error(err)
						}
						mu.Lock()
						probes += res.Probes
						mu.Unlock()
					})
				}
				wg.Wait()
				if probes != 1 {
					t.Fatalf("round %d: %d sweeps at once chose %d probes, want 1", round, len(sweeps), probes)
				}
				b.clock.Advance(10 * time.Second)
			}
			if got := len(b.queued()); got != 5 {
				t.Fatalf("%d retries queued over 5 rounds, want 5 probes", got)
			}
		})
	}
}

// A tick with nothing due stays when a failing webhook's next probe comes
// due before its budget ends, and chooses that probe on time rather than
// leaving it to the next tick; it ends at once when the next probe is
// later. The real clock: the tick waits on real timers.
func TestTickWaitsForAProbeDueWithinIt(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{})
			client := asynq.NewClient(b.opt)
			t.Cleanup(func() { _ = client.Close() })
			s := sweeper.New(b.db, client, b.insp, sweeper.Config{BatchSize: 50, Interval: 5 * time.Second,
				NewTask: tasks.NewRetryTask, TaskID: tasks.RetryTaskID})
			now := time.Now().UTC()
			b.webhook("soon", 0)
			b.due("soon", 10, now.Add(-time.Hour))
			// Probed half a second ago as it started failing: the next
			// probe is a second after that.
			b.setProbe("soon", ptr(now.Add(-500*time.Millisecond)), ptr(now.Add(-500*time.Millisecond)))
			b.webhook("late", 0)
			b.due("late", 10, now.Add(-time.Hour))
			// Failing for an hour and probed now: the next is 10 s away.
			b.setProbe("late", ptr(now.Add(-time.Hour)), ptr(now))

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res, err := s.Tick(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Probes != 1 || res.Enqueued != 1 || !b.queued()["soon-00001"] {
				t.Fatalf("tick %+v, queued %v: want soon's probe, due half a second into the tick", res, b.queued())
			}

			if err := b.db.Exec("UPDATE webhook_health SET failures = 0 WHERE webhook_id = 'soon'").Error; err != nil {
				t.Fatal(err)
			}
			if err := b.db.Exec("DELETE FROM deliveries WHERE webhook_id = 'soon'").Error; err != nil {
				t.Fatal(err)
			}
			ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res, err = s.Tick(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps != 1 || res.Due != 0 {
				t.Fatalf("tick %+v, want one step and an end: late's next probe is after the tick", res)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
