package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// publishAll publishes events ids[i] for doctype in parallel and fails the
// test on the first error.
func publishAll(t *testing.T, c *client.Client, doctype string, ids []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	next := make(chan string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.Publish(ctx, client.Event{ID: id, DocType: doctype, DocName: id, Event: "on_submit",
					Doc: map[string]any{"name": id}})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("publish %s: %w", id, err)
				}
			}
		}()
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestWorkerKilled SIGKILLs the worker three times while 2,000 events flow to
// a receiver that fails every third request, restarting it each time. Every
// event must end Delivered, received with a 2xx, and the duplicate 2xx
// receipts are bounded by the tasks that were active at the kills.
func TestWorkerKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	start := time.Now()
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1s")
	s.env = withEnv(s.env, "HOMING_SWEEPER_INTERVAL", "1s")
	s.env = withEnv(s.env, "HOMING_WORKER_CONCURRENCY", "20")
	redisURL := envValue(s.env, "HOMING_REDIS_URL")
	ropt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(ropt)
	t.Cleanup(func() { _ = insp.Close() })

	rc := testreceiver.Answers(t, func(n int) int {
		if n%3 == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	s.ok(t, nil, "homing", "webhook", "create", "--name", "killed", "--doctype", "Order", "--event", "on_submit",
		"--url", rc.URL, "--max-retries", "100", "--timeout", "2s")
	s.start("scheduler", "scheduler started")
	worker := s.spawn(t, "worker", "worker started")

	c, err := client.New(client.Config{RedisURL: redisURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const n = 2000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("kill-%04d", i)
	}
	publishAll(t, c, "Order", ids)
	t.Logf("published %d events in %s", n, time.Since(start).Round(time.Millisecond))

	// Kill after a random number of receipts in three disjoint ranges, so
	// each kill lands while requests flow.
	ranges := [][2]int{{100, 600}, {800, 1400}, {1600, 2200}}
	inFlight := 0
	for k, r := range ranges {
		at := r[0] + rand.IntN(r[1]-r[0])
		within(t, 2*time.Minute, fmt.Sprintf("kill %d: %d receipts", k+1, at), func() (bool, string) {
			got := len(rc.Requests())
			return got >= at, fmt.Sprintf("%d receipts", got)
		})
		before, err := insp.GetQueueInfo("default")
		if err != nil {
			t.Fatal(err)
		}
		worker.kill(t)
		// The dead worker's tasks stay in the active list until their
		// lease expires: this is exactly what was in flight at the kill.
		after, err := insp.GetQueueInfo("default")
		if err != nil {
			t.Fatal(err)
		}
		inFlight += after.Active
		t.Logf("kill %d at %d receipts (%s): active before %d, at the kill %d", k+1, len(rc.Requests()),
			time.Since(start).Round(time.Millisecond), before.Active, after.Active)
		worker = s.spawn(t, "worker", "worker started")
	}

	db := s.openDB(t)
	within(t, 4*time.Minute, "every delivery Delivered and received", func() (bool, string) {
		counts, err := statusCounts(db, "killed")
		if err != nil {
			return false, err.Error()
		}
		ok := okByID(rc.Requests())
		return counts[models.StatusDelivered] == n && len(ok) == n,
			fmt.Sprintf("statuses %s, %d ids received with 2xx", countStatus(counts), len(ok))
	})
	worker.terminate(t)
	s.stop()
	t.Logf("all %d Delivered %s after the start", n, time.Since(start).Round(time.Millisecond))

	rows := deliveriesOf(t, db, "killed")
	if len(rows) != n {
		t.Fatalf("%d deliveries, want %d", len(rows), n)
	}
	got := rc.Requests()
	ok := okByID(got)
	dups := 0
	for _, d := range rows {
		if d.Status != models.StatusDelivered {
			t.Errorf("delivery %s is %s", d.ID, d.Status)
		}
		switch c := ok[d.ID]; {
		case c == 0:
			t.Errorf("delivery %s (event %s) never received with a 2xx", d.ID, d.EventID)
		case c > 1:
			dups += c - 1
		}
	}
	if len(ok) != n {
		t.Errorf("%d webhook-ids received with 2xx, want %d", len(ok), n)
	}
	beyond, timedOut := repeatsBeyondTimeouts(t, db, ok)
	t.Logf("%d requests in all, %d duplicate 2xx receipts (%d of them retries of attempts that timed out), %d tasks in flight at the kills", len(got), dups, timedOut, inFlight)
	if beyond > inFlight {
		t.Errorf("%d duplicate 2xx receipts no timeout explains, more than the %d tasks in flight at the kills", beyond, inFlight)
	}
}

// ownRedis is a redis-server the test starts, stops and restarts.
type ownRedis struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

func startRedis(t *testing.T, port int, dir string) *ownRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Require(t, fmt.Sprintf("redis-server is not installed (apt-get install redis-server; scripts/services.sh installs it): %v", err))
	}
	r := &ownRedis{port: port, dir: dir, done: make(chan struct{}), out: &syncBuffer{}}
	r.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--appendonly", "yes",
		"--appendfsync", "everysec", "--save", "", "--dir", dir)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("redis-server output:\n%s", r.out.String())
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer func() { _ = rdb.Close() }()
	eventually(t, "redis-server to answer", func() (bool, string) {
		select {
		case <-r.done:
			t.Fatalf("redis-server exited at start:\n%s", r.out.String())
		default:
		}
		err := rdb.Ping(context.Background()).Err()
		return err == nil, fmt.Sprint(err)
	})
	return r
}

func (r *ownRedis) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// shutdown asks Redis to fsync its AOF and exit, and waits until it has.
func (r *ownRedis) shutdown(t *testing.T) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer func() { _ = rdb.Close() }()
	_ = rdb.Shutdown(context.Background()).Err() // the connection closes under the reply
	select {
	case <-r.done:
	case <-time.After(waitTimeout):
		t.Fatalf("redis-server did not exit after SHUTDOWN:\n%s", r.out.String())
	}
	if !strings.Contains(r.out.String(), "ready to exit, bye bye") {
		t.Fatalf("redis-server did not shut down cleanly:\n%s", r.out.String())
	}
}

// TestRedisRestarted stops and restarts the Redis the system uses while
// events flow: publishers get a clear error while it is down, the worker and
// scheduler reconnect by themselves, and every event Publish acknowledged is
// delivered.
func TestRedisRestarted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	start := time.Now()
	dir := t.TempDir()
	port := freePort(t)
	rd := startRedis(t, port, dir)
	s := newSystem(t)
	redisURL := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	s.env = withEnv(s.env, "HOMING_REDIS_URL", redisURL)
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1s")
	s.env = withEnv(s.env, "HOMING_SWEEPER_INTERVAL", "1s")

	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	s.ok(t, nil, "homing", "webhook", "create", "--name", "redis", "--doctype", "Order", "--event", "on_submit",
		"--url", rc.URL, "--max-retries", "100", "--timeout", "2s")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")

	c, err := client.New(client.Config{RedisURL: redisURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var acked []string
	batch := func(prefix string, k int) {
		ids := make([]string, k)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		}
		publishAll(t, c, "Order", ids)
		acked = append(acked, ids...)
	}
	batch("before", 200)
	// Stop Redis while the first batch is still being worked on.
	within(t, waitTimeout, "the first receipts", func() (bool, string) {
		return len(rc.Requests()) >= 20, fmt.Sprintf("%d receipts", len(rc.Requests()))
	})
	rd.shutdown(t)
	t.Logf("redis stopped after %d receipts", len(rc.Requests()))

	// While it is down, Publish says so.
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Publish(ctx, client.Event{ID: fmt.Sprintf("down-%d", i), DocType: "Order", Event: "on_submit",
			Doc: map[string]any{"name": "down"}})
		cancel()
		if err == nil {
			t.Fatal("Publish succeeded while Redis was down")
		}
		msg := strings.ToLower(err.Error())
		if !strings.Contains(msg, "redis") || !(strings.Contains(msg, "connect") || strings.Contains(msg, "refused") || strings.Contains(msg, "dial") || strings.Contains(msg, "unreachable")) {
			t.Errorf("Publish while Redis is down: %q does not say Redis is unreachable", err)
		}
		if i == 0 {
			t.Logf("Publish while Redis is down: %v", err)
		}
	}

	startRedis(t, port, dir)
	batch("after", 200)

	db := s.openDB(t)
	within(t, 3*time.Minute, "every acknowledged event Delivered", func() (bool, string) {
		counts, err := statusCounts(db, "redis")
		if err != nil {
			return false, err.Error()
		}
		return counts[models.StatusDelivered] == len(acked), fmt.Sprintf("statuses %s, %d received", countStatus(counts), len(okByID(rc.Requests())))
	})
	s.stop()
	rows := deliveriesOf(t, db, "redis")
	byEvent := map[string]models.Delivery{}
	for _, d := range rows {
		byEvent[d.EventID] = d
	}
	ok := okByID(rc.Requests())
	dups := 0
	for _, id := range acked {
		d, found := byEvent[id]
		if !found {
			t.Errorf("acknowledged event %s has no delivery", id)
			continue
		}
		if ok[d.ID] == 0 {
			t.Errorf("acknowledged event %s (delivery %s, %s) never received", id, d.ID, d.Status)
		}
		dups += max(ok[d.ID]-1, 0)
	}
	if len(rows) != len(acked) {
		t.Errorf("%d deliveries, want %d (the events refused while Redis was down must not appear)", len(rows), len(acked))
	}
	t.Logf("%d events delivered, %d duplicate receipts, in %s", len(acked), dups, time.Since(start).Round(time.Millisecond))
}

// TestPostgresUnavailable makes the system's database refuse connections
// while events flow: nothing is marked or lost wrongly, and once it accepts
// connections again asynq's retries bring every event to Delivered.
func TestPostgresUnavailable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	start := time.Now()
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1s")
	s.env = withEnv(s.env, "HOMING_SWEEPER_INTERVAL", "1s")
	dsn := envValue(s.env, "HOMING_DATABASE_URL")
	name := dbName(t, dsn)
	admin, err := store.Open(testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(admin) })
	allow := func(on bool) {
		t.Helper()
		if err := admin.Exec(fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS %t", name, on)).Error; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = admin.Exec(fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS true", name)).Error })

	redisURL := envValue(s.env, "HOMING_REDIS_URL")
	ropt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(ropt)
	t.Cleanup(func() { _ = insp.Close() })

	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	s.ok(t, nil, "homing", "webhook", "create", "--name", "pg", "--doctype", "Order", "--event", "on_submit",
		"--url", rc.URL, "--max-retries", "100", "--timeout", "2s")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	c, err := client.New(client.Config{RedisURL: redisURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	ids := func(prefix string, k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%03d", prefix, i)
		}
		return out
	}
	before, down := ids("before", 300), ids("down", 100)
	publishAll(t, c, "Order", before)
	// Cut the database while the first batch flows.
	within(t, waitTimeout, "the first receipts", func() (bool, string) {
		return len(rc.Requests()) >= 20, fmt.Sprintf("%d receipts", len(rc.Requests()))
	})
	allow(false)
	if err := admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", name).Error; err != nil {
		t.Fatal(err)
	}
	cut := len(rc.Requests())
	t.Logf("database refuses connections after %d receipts (%s)", cut, time.Since(start).Round(time.Millisecond))
	publishAll(t, c, "Order", down) // Redis only: accepted while the database is down
	// Keep the database away until every task left has failed on it at
	// least once (each is a retry of asynq's now, whether it waits in the
	// retry set, is pending again or running) and one has failed twice. Not
	// "nothing pending or running": on a loaded machine the retries come
	// due before the queue has gone round once, and that moment never comes.
	within(t, waitTimeout, "every task failing on the database, one of them twice", func() (bool, string) {
		var tasks []*asynq.TaskInfo
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListActiveTasks, insp.ListRetryTasks} {
			got, err := list("default", asynq.PageSize(1000))
			if err != nil {
				return false, err.Error()
			}
			tasks = append(tasks, got...)
		}
		never, most := 0, 0
		for _, ti := range tasks {
			if ti.Retried == 0 {
				never++
			}
			most = max(most, ti.Retried)
		}
		return len(tasks) > 0 && never == 0 && most >= 2,
			fmt.Sprintf("%d tasks, %d not yet failed, most retried %d", len(tasks), never, most)
	})
	during := len(rc.Requests())
	allow(true)
	t.Logf("database back after %d receipts (%d while it refused connections) (%s)", during, during-cut, time.Since(start).Round(time.Millisecond))

	all := append(append([]string(nil), before...), down...)
	db := s.openDB(t)
	within(t, 3*time.Minute, "every event Delivered", func() (bool, string) {
		counts, err := statusCounts(db, "pg")
		if err != nil {
			return false, err.Error()
		}
		return counts[models.StatusDelivered] == len(all), fmt.Sprintf("statuses %s, %d received", countStatus(counts), len(okByID(rc.Requests())))
	})
	s.stop()
	rows := deliveriesOf(t, db, "pg")
	if len(rows) != len(all) {
		t.Errorf("%d deliveries, want %d", len(rows), len(all))
	}
	ok := okByID(rc.Requests())
	dups := 0
	for _, d := range rows {
		if d.Status != models.StatusDelivered || d.LastStatusCode == nil || *d.LastStatusCode != http.StatusOK {
			t.Errorf("delivery %s: status %s, last status code %v", d.ID, d.Status, d.LastStatusCode)
		}
		switch k := ok[d.ID]; {
		case k == 0:
			t.Errorf("delivery %s (event %s) is Delivered but was never received", d.ID, d.EventID)
		case k > 1:
			dups += k - 1
			t.Logf("delivery %s received %d times (%d attempts recorded): the request-sent, record-not-written window", d.ID, k, d.Attempts)
		}
	}
	t.Logf("%d events delivered, %d duplicate receipts, in %s", len(all), dups, time.Since(start).Round(time.Millisecond))
}
