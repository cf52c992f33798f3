package sweeper_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// The gap after a probe is a tenth of the time failing at that probe plus
// the first gap, capped at health.probe_interval: probes chosen as the
// webhook starts failing go out 1, 1.1, 1.21 … s apart, 7 s after a minute,
// then every probe_interval.
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
		{"after 1s failing", time.Second, max, 1100 * time.Millisecond},
		{"after 10s failing", 10 * time.Second, max, 2 * time.Second},
		{"after 30s failing", 30 * time.Second, max, 4 * time.Second},
		{"after a minute failing", time.Minute, max, 7 * time.Second},
		{"after 100s failing: capped", 100 * time.Second, max, max},
		{"exactly at the cap", 90 * time.Second, max, max},
		{"a long outage", 5 * time.Hour, max, max},
		{"half a second failing", 500 * time.Millisecond, max, 1050 * time.Millisecond},
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
		{"4s gap after 30s failing", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(30 * time.Second)}, 34 * time.Second, true},
		{"4s gap, 1ms short", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(30 * time.Second)}, 34*time.Second - time.Millisecond, false},
		{"capped", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(2 * time.Minute)}, 2*time.Minute + max, true},
		{"capped, 1ms short", models.WebhookHealth{FailingSince: at(0), ProbeAt: at(2 * time.Minute)}, 2*time.Minute + max - time.Millisecond, false},
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
// 1, 1.1, 1.21 … s apart (a tenth of the time failing more each time), until
// every probe_interval (10 s); none a millisecond early. The clock moves on
// a 100 ms grid, so each gap is the rule's rounded up to the grid: the test
// steps once at the grid point before the gap ends, where nothing may be
// due, and once at its end, where the probe must be. Stepping at every grid
// point in between (as this test once did, 900 steps a backend) proves no
// more: a probe due early stays due, and the step before the gap's end
// finds it. Each probe is the oldest row not yet probed.
func TestFailingWebhookProbesBackOff(t *testing.T) {
	t.Parallel()
	const step, max = 100 * time.Millisecond, 10 * time.Second
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 200, ProbeInterval: max})
			b.webhook("dead", 0)
			ids := b.due("dead", 200, t0.Add(-time.Hour))
			b.setHealth("dead", models.FailingAfter) // failing since t0
			if res := b.step(); res.Probes != 1 || res.Enqueued != 1 {
				t.Fatalf("first step %+v, want the first probe at once", res)
			}
			var gaps []time.Duration
			var elapsed time.Duration // since t0, the first probe
			probed := map[string]bool{ids[0]: true}
			for i := 1; len(gaps) < 2 || gaps[len(gaps)-2] != max; i++ {
				// The rule's gap after the probe at elapsed, on the step grid.
				rule := sweeper.ProbeGap(t0, t0.Add(elapsed), max)
				waited := (rule + step - 1) / step * step
				b.clock.Advance(waited - step)
				if res := b.step(); res.Due != 0 {
					t.Fatalf("probe %d: step %+v %s after the last probe, want nothing before %s (the rule's gap %s on the grid)",
						i+1, res, waited-step, waited, rule)
				}
				b.clock.Advance(step)
				if res := b.step(); res.Probes != 1 || res.Due != 1 {
					t.Fatalf("probe %d: step %+v %s after the last probe, want the probe (the rule's gap %s on the grid)", i+1, res, waited, rule)
				}
				gaps = append(gaps, waited)
				elapsed += waited
				h := b.health("dead")
				if h.ProbeID == nil || !b.queued()[*h.ProbeID] {
					t.Fatalf("probe %d is %v, want a row of dead's, queued", i+1, h.ProbeID)
				}
				// No worker runs the probes here, so a probed row stays
				// queued; once its queued lease ends it may be the oldest
				// again. Until then each probe is the oldest not probed.
				if !probed[*h.ProbeID] && *h.ProbeID != ids[len(probed)] {
					t.Fatalf("probe %d is %s, want a row probed before or the oldest not probed yet %s", i+1, *h.ProbeID, ids[len(probed)])
				}
				probed[*h.ProbeID] = true
				if i > 60 {
					t.Fatalf("no gap reached probe_interval in 60 probes: %v", gaps)
				}
			}
			// The first gaps are seconds, the first minute's stay under 7.1 s,
			// and the cap is reached about a minute and a half in.
			var minute int
			for i, at := 0, time.Duration(0); i < len(gaps) && at < time.Minute; i++ {
				if i < 3 && gaps[i] > 1300*time.Millisecond {
					t.Fatalf("gap %d is %s, want about a second at the outage's start: %v", i+1, gaps[i], gaps)
				}
				if gaps[i] > 7100*time.Millisecond {
					t.Fatalf("gap %s within the first minute: %v", gaps[i], gaps)
				}
				at += gaps[i]
				minute++
			}
			if minute > 25 {
				t.Fatalf("%d probes in the first minute, want about 20: %v", minute, gaps)
			}
			// Healthy again (a success cleared it): the rest go.
			b.setHealth("dead", 0)
			total := 0
			for range 10 {
				total += b.step().Enqueued
			}
			probes := len(probed)
			if total != 200-probes || len(b.queued()) != 200 {
				t.Fatalf("after recovery %d queued (%d in asynq), want the other %d", total, len(b.queued()), 200-probes)
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
	for _, since := range []time.Duration{0, 999 * ms, time.Second, 1001 * ms, 1049 * ms, 1050 * ms, 1051 * ms, 1099 * ms, 1100 * ms, 1101 * ms, 1299 * ms, 1300 * ms, 1301 * ms, 1899 * ms, 1900 * ms, 1901 * ms, 2 * time.Second, 3999 * ms, 4 * time.Second, 9999 * ms, max, 10001 * ms, time.Minute} {
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
				sweeps = append(sweeps, b.sweeper(client, sweeper.Config{BatchSize: 50}))
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
// due before its budget ends, and chooses that probe on time (at its
// first look at or after the probe's due time, looking every PollFull on
// its clock) rather than leaving it to the next tick; it ends at once when
// the next probe is later.
func TestTickWaitsForAProbeDueWithinIt(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Interval 2s: a tick's budget is 1.8s.
			b := newBed(t, open, sweeper.Config{BatchSize: 50, Interval: 2 * time.Second})
			b.webhook("soon", 0)
			b.due("soon", 10, t0.Add(-time.Hour))
			// Failing for 10 s and probed 1.5 s ago, 8.5 s in: the next
			// probe is 1.85 s after that, 0.35 s into the tick (and the one
			// after it 2.035 s later, past the tick's end).
			b.setProbe("soon", ptr(t0.Add(-10*time.Second)), ptr(t0.Add(-1500*time.Millisecond)))
			b.webhook("late", 0)
			b.due("late", 10, t0.Add(-time.Hour))
			// Failing for an hour and probed now: the next is 10 s away.
			b.setProbe("late", ptr(t0.Add(-time.Hour)), ptr(t0))

			due := t0.Add(350 * time.Millisecond)
			run := b.startTick(b.s)
			for b.clock.Now().Before(due) {
				if !run.sleeping() {
					t.Fatalf("tick ended (%+v) at +%s, want it to wait for soon's probe due at +350ms", run.res, b.clock.Now().Sub(t0))
				}
				if got := b.queued(); len(got) != 0 {
					t.Fatalf("queued %v at +%s, before any probe was due", got, b.clock.Now().Sub(t0))
				}
				b.clock.Advance(sweeper.PollFull)
			}
			if !run.sleeping() {
				t.Fatalf("tick ended (%+v) after choosing a probe, want it to stay to its budget's end", run.res)
			}
			if h := b.health("soon"); !b.queued()["soon-00001"] || h.ProbeAt == nil || !h.ProbeAt.Equal(due) {
				t.Fatalf("queued %v, soon's probe at %v; want soon-00001 probed at +350ms", b.queued(), h.ProbeAt)
			}
			b.clock.Advance(b.s.TickBudget())
			if res := run.result(t); res.Probes != 1 || res.Enqueued != 1 {
				t.Fatalf("tick %+v, want soon's one probe", res)
			}

			if err := b.db.Exec("UPDATE webhook_health SET failures = 0 WHERE webhook_id = 'soon'").Error; err != nil {
				t.Fatal(err)
			}
			if err := b.db.Exec("DELETE FROM deliveries WHERE webhook_id = 'soon'").Error; err != nil {
				t.Fatal(err)
			}
			run = b.startTick(b.s)
			if run.sleeping() {
				t.Fatalf("tick waits (until %v) for late's probe, which is after its end", b.clock.Now())
			}
			if res := run.result(t); res.Steps != 1 || res.Due != 0 {
				t.Fatalf("tick %+v, want one step and an end: late's next probe is after the tick", res)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
