package tests

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// TestDeadEndpointIsProbedThenDrained is the outage issue #14 is about, with
// real processes: a receiver goes down with 1,000 deliveries failed, costs
// one probe at a time while it is down however many retries are due, and
// once it answers again every delivery arrives, each exactly once.
func TestDeadEndpointIsProbedThenDrained(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const n = 1000
	s := newSystem(t)
	s.env = append(s.env,
		"HOMING_RETRY_SCHEDULE=1s",
		"HOMING_SWEEPER_INTERVAL=1s",
		"HOMING_WORKER_CONCURRENCY=20",
	)
	var up atomic.Bool
	rc := testreceiver.Answers(t, func(int) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	s.start("worker", "worker started")
	s.ok(t, nil, "homing", "webhook", "create", "--name", "dead", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", rc.URL+"/dead", "--max-retries", "100")
	publishN(t, s.publisher(t), "dead", n)
	eventually(t, "every first attempt to fail", func() (bool, string) {
		return len(rc.Requests()) >= n, fmt.Sprintf("%d requests", len(rc.Requests()))
	})
	s.start("scheduler", "scheduler started")
	// All 1,000 are due every second; the endpoint is failing, so it gets
	// probes 1, 1.1, 1.21 … s apart (sweeper.ProbeGap: at most eight in the
	// 10 s after the first was chosen), not the backlog.
	db := s.openDB(t)
	eventually(t, "the webhook to be probed", func() (bool, string) {
		var h models.WebhookHealth
		db.Raw("SELECT h.* FROM webhook_health h JOIN webhooks w ON w.id = h.webhook_id WHERE w.name = 'dead'").Scan(&h)
		return h.ProbeAt != nil, fmt.Sprintf("%+v", h)
	})
	from := len(rc.Requests())
	window := 10 * time.Second
	time.Sleep(window) // a measured window, not a wait for a condition
	during := len(rc.Requests()) - from
	// The probes the rule allows in the window (those of 1, 2.1, 3.3, 4.6,
	// 6.1, 7.7 and 9.5 s after the first); one more for a probe already
	// sent. The backlog would be hundreds.
	if during > probesWithin(window)+1 {
		t.Fatalf("a dead endpoint with %d due retries got %d requests in %s; want about one per probe interval", n, during, window)
	}
	var shown struct {
		Health struct {
			State    string `json:"state"`
			HeldBack int64  `json:"held_back"`
		} `json:"health"`
	}
	s.ok(t, &shown, "homing", "webhook", "show", "dead", "--json")
	if shown.Health.State != "failing" || shown.Health.HeldBack < n-10 {
		t.Fatalf("webhook show: health %+v, want failing with about %d held back", shown.Health, n)
	}

	var stats struct {
		Webhooks []struct {
			Webhook  string `json:"webhook"`
			Health   string `json:"health"`
			HeldBack int64  `json:"held_back"`
		} `json:"webhooks"`
	}
	s.ok(t, &stats, "homing", "stats", "--json")
	if len(stats.Webhooks) != 1 || stats.Webhooks[0].Health != "failing" || stats.Webhooks[0].HeldBack < n-10 {
		t.Fatalf("homing stats: %+v, want dead failing with about %d held back", stats.Webhooks, n)
	}

	up.Store(true)
	recovered := time.Now()
	eventually(t, "every delivery after recovery", func() (bool, string) {
		st, err := statusCounts(db, "dead")
		if err != nil {
			return false, err.Error()
		}
		return st[models.StatusDelivered] == n, countStatus(st) + stuck(db, "dead")
	})
	drain := time.Since(recovered)
	ok := okByID(rc.Requests())
	if len(ok) != n {
		t.Fatalf("%d deliveries got a 200, want %d", len(ok), n)
	}
	for id, c := range ok {
		if c != 1 {
			t.Errorf("delivery %s answered 200 %d times", id, c)
		}
	}
	t.Logf("dead endpoint: %d requests in %s with %d due; drained %d in %s after recovery", during, window, n, n, drain.Round(time.Millisecond))
	s.stop()
}

// TestOneBacklogDoesNotStarveAnother gives webhook A 20,000 due retries and
// webhook B 50: B's are delivered while most of A's still wait.
func TestOneBacklogDoesNotStarveAnother(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	s := newSystem(t)
	s.env = append(s.env, "HOMING_SWEEPER_INTERVAL=1s", "HOMING_WORKER_CONCURRENCY=20")
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	for _, name := range []string{"a", "b"} {
		s.ok(t, nil, "homing", "webhook", "create", "--name", name, "--doctype", "Sales Order", "--event", "on_submit",
			"--url", rc.URL+"/"+name)
	}
	db := s.openDB(t)
	seedDue(t, db, "a", 20000, time.Now().Add(-2*time.Hour))
	seedDue(t, db, "b", 50, time.Now().Add(-time.Minute))
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	var aAtB int
	eventually(t, "B's retries", func() (bool, string) {
		st, err := statusCounts(db, "b")
		if err != nil {
			return false, err.Error()
		}
		a, _ := statusCounts(db, "a")
		aAtB = a[models.StatusDelivered]
		return st[models.StatusDelivered] == 50, fmt.Sprintf("b %s, a %s", countStatus(st), countStatus(a))
	})
	if aAtB > 10000 {
		t.Fatalf("B's 50 retries waited for %d of A's older 20,000", aAtB)
	}
	t.Logf("B's 50 retries were all delivered when %d of A's 20,000 were", aAtB)
	s.stop()
}

// TestOneTenantsBacklogDoesNotStarveAnother gives tenant A 20,000 due
// retries over 40 webhooks and tenant B 50 on one: B's are all delivered
// before A is a tenth drained. Shared webhook by webhook alone, B's one
// webhook would get a 41st of each step and wait for about 2,500 of A's.
//
// The receivers take 300 ms to answer, longer than an attempt past its
// tenant's share waits for a request to end (200 ms), whatever the
// machine's speed: B's burst of retries past its share (5 of the worker's
// 20) is refused, and must keep its place. Given back to the sweep, each
// refused retry went round a queue of A's backlog again (CI saw 6 of B's
// 50 still waiting after 3,343 of A's, on a loaded machine whose
// receivers answered in a second); parked, it is sent as B's requests end.
func TestOneTenantsBacklogDoesNotStarveAnother(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	s := newSystem(t)
	s.env = append(s.env, "HOMING_SWEEPER_INTERVAL=1s", "HOMING_WORKER_CONCURRENCY=20")
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	rc.SetDelay(300 * time.Millisecond)
	for _, ten := range []string{"tenant-a", "tenant-b"} {
		s.ok(t, nil, "homing", "tenant", "create", ten)
	}
	var aHooks []string
	for i := range 40 {
		aHooks = append(aHooks, fmt.Sprintf("a%d", i))
	}
	create := func(ten, name string) {
		s.ok(t, nil, "homing", "webhook", "create", "--tenant", ten, "--name", name, "--doctype", "Sales Order", "--event", "on_submit",
			"--url", rc.URL+"/"+name)
	}
	for _, name := range aHooks {
		create("tenant-a", name)
	}
	create("tenant-b", "b")
	db := s.openDB(t)
	for _, name := range aHooks {
		seedDue(t, db, name, 500, time.Now().Add(-2*time.Hour))
	}
	seedDue(t, db, "b", 50, time.Now().Add(-time.Minute))
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	aDelivered := func() int {
		var n int64
		if err := db.Model(&models.Delivery{}).Where("tenant = ? AND status = ?", "tenant-a", models.StatusDelivered).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	var aAtB int
	eventually(t, "B's retries", func() (bool, string) {
		st, err := statusCounts(db, "b")
		if err != nil {
			return false, err.Error()
		}
		aAtB = aDelivered()
		return st[models.StatusDelivered] == 50, fmt.Sprintf("b %s, a delivered %d", countStatus(st), aAtB)
	})
	var toB int
	for _, r := range rc.Requests() {
		if r.Path == "/b" {
			toB++
		}
	}
	if toB < 50 {
		t.Fatalf("B's receiver got %d requests, fewer than its 50 retries", toB)
	}
	if aAtB > 2000 {
		t.Fatalf("B's 50 retries waited for %d of tenant A's older 20,000 (more than a tenth)", aAtB)
	}
	t.Logf("tenant B's 50 retries were all delivered when %d of tenant A's 20,000 were", aAtB)
	s.stop()
}

// seedDue writes n Failed deliveries of webhook, due since at, as a fan-out
// and a failed first attempt would have left them.
func seedDue(t *testing.T, db *gorm.DB, webhook string, n int, at time.Time) {
	t.Helper()
	var w models.Webhook
	if err := db.Where("name = ?", webhook).Take(&w).Error; err != nil {
		t.Fatal(err)
	}
	rows := make([]models.Delivery, n)
	for i := range rows {
		id := uuid.Must(uuid.NewV7()).String()
		next := at.Add(time.Duration(i) * time.Microsecond).UTC()
		rows[i] = models.Delivery{
			ID: id, Tenant: w.Tenant, WebhookID: w.ID, WebhookName: w.Name, EventID: "seed-" + id, DocType: w.DocType, DocEvent: w.DocEvent,
			Method: "POST", URL: w.RequestURL, Headers: models.StringMap{"Content-Type": "application/json"},
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Status: models.StatusFailed, Attempts: 1, MaxRetries: 3,
			NextRetry: &next, LastError: "seeded", CreatedAt: at.UTC(), UpdatedAt: at.UTC(),
		}
	}
	if err := db.CreateInBatches(rows, 500).Error; err != nil {
		t.Fatal(err)
	}
}

// TestRateLimitHoldsAcrossTwoWorkers runs two worker processes against a
// webhook limited to 5 requests a second: whichever worker sends, the
// shared limiter admits no more than the limit allows, and no request is
// sent that it did not admit.
//
// The limit is judged on the limiter's own clock (Redis's, read by a
// MONITOR of its admissions), not by when requests reach the receiver: on
// a loaded machine two requests admitted in different seconds can arrive
// in the same one, and that is the machine, not the limiter.
func TestRateLimitHoldsAcrossTwoWorkers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const (
		n    = 60
		rate = 5
	)
	s := newSystem(t)
	s.env = append(s.env, "HOMING_SWEEPER_INTERVAL=1s", "HOMING_RETRY_SCHEDULE=1s")
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	s.ok(t, nil, "homing", "webhook", "create", "--name", "limited", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", rc.URL+"/limited", "--rate-limit", fmt.Sprint(rate))
	db := s.openDB(t)
	var hook models.Webhook
	if err := db.Where("name = ?", "limited").Take(&hook).Error; err != nil {
		t.Fatal(err)
	}
	// go-redis/redis_rate keys its limiters "rate:" + the key it is given.
	admissions := watchAdmissions(t, "rate:homing:rate:"+hook.ID)
	s.start("worker", "worker started")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	publishN(t, s.publisher(t), "limited", n)
	eventually(t, "every delivery", func() (bool, string) {
		st, err := statusCounts(db, "limited")
		if err != nil {
			return false, err.Error()
		}
		return st[models.StatusDelivered] == n, countStatus(st)
	})
	s.stop()
	got := rc.Requests()
	if len(got) != n {
		t.Fatalf("receiver got %d requests for %d deliveries (a rate-limited request is postponed, not sent)", len(got), n)
	}
	for id, c := range okByID(got) {
		if c != 1 {
			t.Errorf("delivery %s arrived %d times", id, c)
		}
	}
	times := admissions()
	if len(times) < len(got) {
		t.Fatalf("the limiter admitted %d requests and the receiver got %d: a request was sent without the limiter's leave", len(times), len(got))
	}
	worst, span := gcraBounds(times)
	// GCRA with a burst of one second's worth: any one-second window holds
	// at most burst + rate admissions, and n admissions take at least
	// (n - burst) / rate from the first to the last.
	if worst > 2*rate {
		t.Errorf("the limiter admitted %d requests within one second; the limit is %d/s with a burst of %d", worst, rate, rate)
	}
	if least := time.Duration(len(times)-rate) * time.Second / rate; span < least-admissionSlack {
		t.Errorf("the limiter admitted %d requests in %s, faster than %d/s with a burst of %d allows (%s)", len(times), span, rate, rate, least)
	}
	t.Logf("%d admissions over %s on Redis's clock, at most %d in one second", len(times), span.Round(time.Millisecond), worst)
}

// admissionSlack is how far apart MONITOR's timestamp of a limiter's SET
// and the TIME its script read can be: both are the one Redis server's
// clock, within one command.
const admissionSlack = 5 * time.Millisecond

// gcraBounds answers the most of times (sorted here) within any window of
// one second less admissionSlack, and the span from the first to the last.
func gcraBounds(times []time.Time) (worst int, span time.Duration) {
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < time.Second-admissionSlack {
			j++
		}
		worst = max(worst, j-i)
	}
	if len(times) > 0 {
		span = times[len(times)-1].Sub(times[0])
	}
	return worst, span
}

// watchAdmissions follows the test binary's Redis with MONITOR and keeps
// the time, on Redis's clock, of every SET of key: go-redis/redis_rate's
// GCRA script sets its key when, and only when, it admits a request. The
// function it returns stops the watch and answers those times.
func watchAdmissions(t *testing.T, key string) func() []time.Time {
	t.Helper()
	addr, err := testenv.RedisAddr()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("monitor %s: %v", addr, err)
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR answered %q, %v", line, err)
	}
	var (
		mu    sync.Mutex
		times []time.Time
		bad   []string
		done  = make(chan struct{})
	)
	quoted := strconv.Quote(key)
	go func() {
		defer close(done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // the connection closed by stop
			}
			// +1339518083.107412 [0 lua] "SET" "homing:rate:…" "…" "EX" "2"
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "+"))
			if len(f) < 5 || !strings.EqualFold(f[3], `"set"`) || f[4] != quoted {
				continue
			}
			at, err := monitorTime(f[0])
			mu.Lock()
			if err != nil {
				bad = append(bad, line)
			} else {
				times = append(times, at)
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() []time.Time {
		once.Do(func() {
			_ = conn.Close()
			<-done
		})
		mu.Lock()
		defer mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("MONITOR lines without a time: %q", bad)
		}
		return append([]time.Time(nil), times...)
	}
	t.Cleanup(func() { stop() })
	return stop
}

// monitorTime reads MONITOR's "seconds.microseconds".
func monitorTime(s string) (time.Time, error) {
	sec, usec, ok := strings.Cut(s, ".")
	if !ok {
		return time.Time{}, fmt.Errorf("no fraction in %q", s)
	}
	a, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	b, err := strconv.ParseInt(usec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(a, b*int64(time.Microsecond)), nil
}

// probesWithin is how many probes sweeper.ProbeGap allows in window after
// a webhook's first probe (chosen as it started failing), at the default
// health.probe_interval.
func probesWithin(window time.Duration) int {
	n, at := 0, time.Duration(0)
	for {
		at += sweeper.ProbeGap(time.Time{}, time.Time{}.Add(at), sweeper.DefaultProbeInterval)
		if at > window {
			return n
		}
		n++
	}
}
