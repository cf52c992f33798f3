package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homingdev/homing/client"
)

// slowReceiver answers every request with its current status after its
// current delay, and records when each request started and whether its
// handler finished (answered) or was abandoned by the sender.
type slowReceiver struct {
	*httptest.Server
	mu          sync.Mutex
	status      int
	delay       time.Duration
	inFlight    int
	maxInFlight int
	calls       []*slowCall
}

type slowCall struct {
	id       string // webhook-id
	status   int
	started  time.Time
	finished bool // the handler wrote its answer
	aborted  bool // the sender went away before the answer
}

func newSlowReceiver(t *testing.T, status int, delay time.Duration) *slowReceiver {
	rc := &slowReceiver{status: status, delay: delay}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		c := &slowCall{id: r.Header.Get("webhook-id"), status: rc.status, started: time.Now()}
		delay := rc.delay
		rc.calls = append(rc.calls, c)
		rc.inFlight++
		rc.maxInFlight = max(rc.maxInFlight, rc.inFlight)
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inFlight--
			rc.mu.Unlock()
		}()
		if delay > 0 {
			timer := time.NewTimer(delay) // the receiver's slowness, not a synchronisation
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-r.Context().Done():
				rc.mu.Lock()
				c.aborted = true
				rc.mu.Unlock()
				return
			}
		}
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, "ok")
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		rc.mu.Lock()
		c.finished = true
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

// set changes how the following requests are answered.
func (rc *slowReceiver) set(status int, delay time.Duration) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.status, rc.delay = status, delay
}

// snapshot copies the calls so far and the current in-flight count.
func (rc *slowReceiver) snapshot() (calls []slowCall, inFlight, maxInFlight int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, c := range rc.calls {
		calls = append(calls, *c)
	}
	return calls, rc.inFlight, rc.maxInFlight
}

// envValue is the value the processes see for key: the last entry wins, as
// in os/exec.
func (s *system) envValue(key string) string {
	v := ""
	for _, kv := range s.env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// publisher connects an in-process client to the system's Redis.
func (s *system) publisher(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{RedisURL: s.envValue("HOMING_REDIS_URL")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func publishN(t *testing.T, c *client.Client, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		name := fmt.Sprintf("SO-%03d", i)
		// A deadline for each publish, not for all n: how long n take is
		// the machine's speed.
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		_, err := c.Publish(ctx, client.Event{ID: ids[i], DocType: "Sales Order", DocName: name, Event: "on_submit",
			Doc: map[string]any{"name": name, "grand_total": i}})
		cancel()
		if err != nil {
			t.Fatalf("publish %s: %v", ids[i], err)
		}
	}
	return ids
}

// deliveriesOf lists every delivery of webhook.
func (s *system) deliveriesOf(t *testing.T, webhook string) []delivery {
	t.Helper()
	var list []delivery
	s.ok(t, &list, "homing", "delivery", "list", "--webhook", webhook, "--limit", "10000", "--json")
	return list
}

func countStatuses(list []delivery) map[string]int {
	m := map[string]int{}
	for _, d := range list {
		m[d.Status]++
	}
	return m
}

// forget drops p from the processes stop signals, once it has exited.
func (s *system) forget(p *process) {
	for i, q := range s.procs {
		if q == p {
			s.procs = append(s.procs[:i], s.procs[i+1:]...)
			return
		}
	}
}

// TestTwoSchedulersAndSlowReceivers makes 200 deliveries due at once, then
// lets two schedulers sweep every second while a receiver takes 3 s per
// request: each delivery must reach the receiver exactly twice (the failed
// first attempt and one successful retry).
func TestTwoSchedulersAndSlowReceivers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const n = 200
	start := time.Now()
	s := newSystem(t)
	s.env = append(s.env,
		"HOMING_SWEEPER_INTERVAL=1s",
		"HOMING_RETRY_SCHEDULE=1s",
		"HOMING_WORKER_CONCURRENCY=50",
		"HOMING_DELIVERY_TIMEOUT=10s",
		// The deliveries run on their own queue, so that the sweeps (on
		// "default") take freed slots at once instead of queuing behind
		// 150 pending retries: that is what makes them race the retries.
		"HOMING_WORKER_QUEUES=default=6,slow=1",
	)
	rc := newSlowReceiver(t, http.StatusInternalServerError, 0)
	worker := s.start("worker", "worker started")
	s.ok(t, nil, "homing", "webhook", "create", "--name", "slow", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", rc.URL+"/slow", "--queue", "slow", "--max-retries", "3")
	publishN(t, s.publisher(t), "two-sched", n)

	// No scheduler runs yet, so nothing retries: every first attempt fails
	// and leaves a Failed row, due a second later.
	eventually(t, "every first attempt to fail", func() (bool, string) {
		calls, _, _ := rc.snapshot()
		list := s.deliveriesOf(t, "slow")
		failed := 0
		for _, d := range list {
			if d.Status == "Failed" && d.Attempts == 1 {
				failed++
			}
		}
		return len(calls) == n && failed == n, fmt.Sprintf("%d requests, %d rows %v, %d Failed after one attempt", len(calls), len(list), countStatuses(list), failed)
	})
	rc.set(http.StatusOK, 3*time.Second)
	retriesFrom := time.Now()
	s.start("scheduler", "scheduler started")
	s.start("scheduler", "scheduler started")

	eventually(t, "every retry to succeed", func() (bool, string) {
		list := s.deliveriesOf(t, "slow")
		st := countStatuses(list)
		if st["Exhausted"] > 0 {
			t.Fatalf("%d deliveries Exhausted: %v", st["Exhausted"], st)
		}
		return len(list) == n && st["Delivered"] == n, fmt.Sprintf("%d rows %v", len(list), st)
	})
	retriesTook := time.Since(retriesFrom)
	// Let the schedulers sweep a few more times over the finished rows, and
	// any request still open finish, before stopping everything.
	quietUntil := time.Now().Add(3 * time.Second)
	eventually(t, "the receiver to go quiet", func() (bool, string) {
		_, inFlight, _ := rc.snapshot()
		return inFlight == 0 && time.Now().After(quietUntil), fmt.Sprintf("%d in flight", inFlight)
	})
	s.stop()

	// Both schedulers' sweeps ran while the slow retries were in flight. A
	// sweep marks the rows it queues (queued_at), so a later tick does not
	// read them again; two ticks that read the same rows at once meet at
	// the retry TaskID (in_hand). Either way, the receiver counts below
	// must show each delivery exactly once more.
	sweeps, inHandSweeps := 0, 0
	for _, m := range regexp.MustCompile(`msg=sweep .*in_hand=(\d+)`).FindAllStringSubmatch(worker.output.String(), -1) {
		sweeps++
		if m[1] != "0" {
			inHandSweeps++
		}
	}
	if sweeps == 0 {
		t.Errorf("no sweep took a due row")
	}

	calls, _, maxInFlight := rc.snapshot()
	type seen struct{ fail, ok, other int }
	byID := map[string]*seen{}
	for _, c := range calls {
		if byID[c.id] == nil {
			byID[c.id] = &seen{}
		}
		switch {
		case c.aborted || !c.finished:
			byID[c.id].other++
		case c.status == http.StatusInternalServerError:
			byID[c.id].fail++
		case c.status == http.StatusOK:
			byID[c.id].ok++
		default:
			byID[c.id].other++
		}
	}
	list := s.deliveriesOf(t, "slow")
	if len(list) != n {
		t.Fatalf("%d deliveries, want %d", len(list), n)
	}
	dups := 0
	for _, d := range list {
		got := byID[d.ID]
		if got == nil {
			t.Errorf("delivery %s never reached the receiver", d.ID)
			continue
		}
		if got.fail != 1 || got.ok != 1 || got.other != 0 {
			dups++
			t.Errorf("delivery %s reached the receiver as %d×500, %d×200, %d unfinished; want exactly one of each", d.ID, got.fail, got.ok, got.other)
		}
		if d.Status != "Delivered" || d.Attempts != 2 {
			t.Errorf("delivery %s is %s after %d attempts, want Delivered after 2", d.ID, d.Status, d.Attempts)
		}
	}
	if len(byID) != n || len(calls) != 2*n {
		t.Errorf("receiver saw %d requests for %d webhook-ids, want %d for %d", len(calls), len(byID), 2*n, n)
	}
	t.Logf("%d retries at up to %d concurrent requests took %s; %d sweeps found due rows, %d of them some already in hand; %d deliveries doubled; whole test %s",
		n, maxInFlight, retriesTook.Round(time.Millisecond), sweeps, inHandSweeps, dups, time.Since(start).Round(time.Millisecond))
}

// TestGracefulShutdown sends SIGTERM to a worker in the middle of a burst to
// a slow receiver: the requests in flight finish and are recorded, the worker
// exits 0 within its shutdown timeout, and a new worker delivers the rest,
// each exactly once.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const (
		n               = 30
		shutdownTimeout = 10 * time.Second
	)
	start := time.Now()
	s := newSystem(t)
	s.env = append(s.env,
		"HOMING_WORKER_CONCURRENCY=5",
		"HOMING_WORKER_SHUTDOWN_TIMEOUT="+shutdownTimeout.String(),
	)
	rc := newSlowReceiver(t, http.StatusOK, 2*time.Second)
	w := s.start("worker", "worker started")
	s.ok(t, nil, "homing", "webhook", "create", "--name", "burst", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", rc.URL+"/burst")
	publishN(t, s.publisher(t), "burst", n)

	eventually(t, "three requests in flight", func() (bool, string) {
		_, inFlight, _ := rc.snapshot()
		return inFlight >= 3, fmt.Sprintf("%d in flight", inFlight)
	})
	_, inFlightAtSignal, _ := rc.snapshot()
	signalled := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatalf("worker did not exit within %s of SIGTERM (shutdown timeout %s)", shutdownTimeout+5*time.Second, shutdownTimeout)
	}
	stopTook := time.Since(signalled)
	s.forget(w)
	if w.err != nil {
		t.Fatalf("worker exited with %v after SIGTERM, want status 0:\n%s", w.err, w.output.String())
	}

	// Every request that had started finished, and the worker recorded it.
	calls, inFlight, _ := rc.snapshot()
	if inFlight != 0 {
		t.Errorf("%d requests still open at the receiver after the worker exited", inFlight)
	}
	sent := map[string]bool{}
	for _, c := range calls {
		if !c.finished || c.aborted {
			t.Errorf("request for delivery %s (started %s before SIGTERM) did not finish: aborted=%v", c.id, signalled.Sub(c.started).Round(time.Millisecond), c.aborted)
		}
		if sent[c.id] {
			t.Errorf("delivery %s reached the receiver twice before the restart", c.id)
		}
		sent[c.id] = true
	}
	before := s.deliveriesOf(t, "burst")
	for _, d := range before {
		switch {
		case sent[d.ID] && (d.Status != "Delivered" || d.Attempts != 1):
			t.Errorf("delivery %s was answered 200 but is %s after %d attempts: the worker did not record it", d.ID, d.Status, d.Attempts)
		case !sent[d.ID] && (d.Status != "Failed" || d.Attempts != 0):
			t.Errorf("delivery %s was never sent but is %s after %d attempts", d.ID, d.Status, d.Attempts)
		}
	}
	if len(sent) >= n {
		t.Errorf("all %d events were sent before the worker stopped; the burst did not outlast the shutdown", n)
	}
	sentBeforeRestart := len(sent)

	s.start("worker", "worker started")
	eventually(t, "all deliveries to be Delivered", func() (bool, string) {
		list := s.deliveriesOf(t, "burst")
		st := countStatuses(list)
		if st["Exhausted"] > 0 {
			t.Fatalf("%d deliveries Exhausted: %v", st["Exhausted"], st)
		}
		return len(list) == n && st["Delivered"] == n, fmt.Sprintf("%d rows %v", len(list), st)
	})
	eventually(t, "the receiver to go idle", func() (bool, string) {
		_, inFlight, _ := rc.snapshot()
		return inFlight == 0, fmt.Sprintf("%d in flight", inFlight)
	})
	s.stop()

	calls, _, _ = rc.snapshot()
	ok2xx := map[string]int{}
	for _, c := range calls {
		if c.finished && !c.aborted && c.status/100 == 2 {
			ok2xx[c.id]++
		} else {
			t.Errorf("request for delivery %s did not finish (aborted=%v)", c.id, c.aborted)
		}
	}
	list := s.deliveriesOf(t, "burst")
	for _, d := range list {
		if ok2xx[d.ID] != 1 {
			t.Errorf("delivery %s (event %s) received %d times with a 2xx, want exactly 1", d.ID, d.EventID, ok2xx[d.ID])
		}
		if d.Status != "Delivered" || d.Attempts != 1 {
			t.Errorf("delivery %s is %s after %d attempts, want Delivered after 1", d.ID, d.Status, d.Attempts)
		}
	}
	if len(list) != n || len(calls) != n || len(ok2xx) != n {
		t.Errorf("%d deliveries, %d requests for %d webhook-ids, want %d of each", len(list), len(calls), len(ok2xx), n)
	}
	t.Logf("SIGTERM with %d in flight: worker exited 0 after %s; %d sent before the restart, %d after; whole test %s",
		inFlightAtSignal, stopTook.Round(time.Millisecond), sentBeforeRestart, n-sentBeforeRestart, time.Since(start).Round(time.Millisecond))
}
