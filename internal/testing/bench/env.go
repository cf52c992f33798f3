package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// env is what every scenario runs on: a PostgreSQL database of its own
// (homing_bench_<random>, dropped at the end), a reserved Redis database
// index, the worker and scheduler binaries built for this run, and the
// loopback receiver.
type env struct {
	dsn      string
	db       *gorm.DB
	redis    asynq.RedisClientOpt
	rdb      *redis.Client
	redisURL string
	binDir   string
	recv     *receiver
	cleanups []func()
	// cpuProfile, when set, runs the throughput scenarios' worker in this
	// process and writes a CPU profile of each run there.
	cpuProfile string
	// serveProfile, when set, is where homing serve of the http scenario
	// writes its CPU profile (cli.CPUProfileEnv), run after run.
	serveProfile string
	// workerEnv is added to the worker's and scheduler's environment.
	workerEnv []string
}

// setup builds everything env holds; close undoes it, whatever got built.
func setup(ctx context.Context, logf func(string, ...any)) (*env, error) {
	e := &env{}
	admin, err := store.Open(testenv.PostgresURL())
	if err != nil {
		return e, fmt.Errorf("PostgreSQL is required (run scripts/services.sh or set HOMING_TEST_DATABASE_URL): %w", err)
	}
	name := "homing_bench_" + randomHex(6)
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		_ = store.Close(admin)
		return e, fmt.Errorf("create database %s: %w", name, err)
	}
	_ = store.Close(admin)
	e.cleanups = append(e.cleanups, func() {
		a, err := store.Open(testenv.PostgresURL())
		if err != nil {
			return
		}
		defer func() { _ = store.Close(a) }()
		_ = a.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error
	})
	e.dsn = withDB(testenv.PostgresURL(), name)
	if e.db, err = store.Open(e.dsn); err != nil {
		return e, err
	}
	e.cleanups = append(e.cleanups, func() { _ = store.Close(e.db) })
	if _, err := store.Migrate(ctx, e.db); err != nil {
		return e, fmt.Errorf("migrate %s: %w", name, err)
	}
	logf("database %s", name)

	addr, err := testenv.RedisAddr() // a redis-server of the harness's own, unless HOMING_TEST_REDIS_URL names one
	e.cleanups = append(e.cleanups, testenv.StopRedis)
	if err != nil {
		return e, err
	}
	opt, rdb, release, err := testenv.ReserveRedis(ctx, addr, 2*time.Minute)
	if err != nil {
		return e, err
	}
	e.cleanups = append(e.cleanups, release)
	e.redis, e.rdb = opt, rdb
	e.redisURL = testenv.RedisURL(opt)
	logf("redis %s", e.redisURL)

	e.binDir, err = os.MkdirTemp("", "homing-bench-")
	if err != nil {
		return e, err
	}
	e.cleanups = append(e.cleanups, func() { _ = os.RemoveAll(e.binDir) })
	build := exec.CommandContext(ctx, "go", "build", "-o", e.binDir+string(filepath.Separator),
		"github.com/homingdev/homing/cmd/worker", "github.com/homingdev/homing/cmd/scheduler", "github.com/homingdev/homing/cmd/homing")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return e, fmt.Errorf("build the worker, scheduler and homing: %w", err)
	}

	e.recv, err = newReceiver()
	if err != nil {
		return e, err
	}
	e.cleanups = append(e.cleanups, e.recv.close)
	logf("receiver %s", e.recv.url)
	return e, nil
}

// close undoes setup, last step first.
func (e *env) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// reset empties the database and the Redis index between runs.
func (e *env) reset(ctx context.Context) error {
	if err := e.db.WithContext(ctx).Exec("TRUNCATE delivery_attempts, deliveries, webhook_health, webhooks, outbox_events, published_events, portal_links, api_tokens").Error; err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	// The tenants scenario's tenants (their portal links go with them).
	if err := e.db.WithContext(ctx).Exec("DELETE FROM tenants WHERE name <> 'default'").Error; err != nil {
		return fmt.Errorf("delete tenants: %w", err)
	}
	if err := e.rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("flush redis: %w", err)
	}
	return nil
}

// homingEnv is the environment of the worker and scheduler processes.
func (e *env) homingEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOMING_") {
			out = append(out, kv)
		}
	}
	out = append(out,
		// The name picks the worker's backends out in pg_stat_activity.
		"HOMING_DATABASE_URL="+e.dsn+"&application_name="+workerAppName,
		"HOMING_REDIS_URL="+e.redisURL,
		"HOMING_METRICS_ADDR=",
		"HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true", // the receiver is on loopback
		"HOMING_WORKER_SHUTDOWN_TIMEOUT=10s",
		"HOMING_LOG_FORMAT=json",
	)
	out = append(out, extra...)
	// Later entries win: -worker-env overrides the settings above.
	return append(out, e.workerEnv...)
}

// redisMark is what Redis had done at a point of a run: the CPU it has
// used so far, user and system (INFO cpu), and how many times it has run
// each command (INFO commandstats, the commands scripts call included).
// The harness's processes are its only clients during a run.
type redisMark struct {
	cpu   time.Duration
	calls map[string]int64
}

// redisNow reads Redis's mark, in one INFO call.
func (e *env) redisNow(ctx context.Context) (redisMark, error) {
	info, err := e.rdb.InfoMap(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return redisMark{}, fmt.Errorf("redis INFO cpu commandstats: %w", err)
	}
	m := redisMark{calls: map[string]int64{}}
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		f, err := strconv.ParseFloat(info["CPU"][k], 64)
		if err != nil {
			return redisMark{}, fmt.Errorf("redis INFO cpu: %s: %w", k, err)
		}
		m.cpu += time.Duration(f * float64(time.Second))
	}
	for name, stats := range info["Commandstats"] {
		for _, kv := range strings.Split(stats, ",") {
			if n, ok := strings.CutPrefix(kv, "calls="); ok {
				v, err := strconv.ParseInt(n, 10, 64)
				if err != nil {
					return redisMark{}, fmt.Errorf("redis INFO commandstats: %s: %w", name, err)
				}
				m.calls[strings.TrimPrefix(name, "cmdstat_")] = v
			}
		}
	}
	return m, nil
}

// since is Redis's CPU per delivery (ms) and its commands per delivery
// (callsPer) from m to now, over n deliveries.
func (m redisMark) since(ctx context.Context, e *env, n int) (float64, string, error) {
	now, err := e.redisNow(ctx)
	if err != nil {
		return 0, "", err
	}
	return perDelivery(now.cpu-m.cpu, n), callsPer(m.calls, now.calls, n), nil
}

// callsPer formats the commands run between before and after, per
// delivery, most first: "evalsha 2.05, hset 1.00, …".
func callsPer(before, after map[string]int64, n int) string {
	type c struct {
		name string
		per  float64
	}
	var cs []c
	for name, v := range after {
		if d := v - before[name]; d > 0 && name != "info" {
			cs = append(cs, c{name, float64(d) / float64(n)})
		}
	}
	slices.SortFunc(cs, func(a, b c) int { return cmp.Compare(b.per, a.per) })
	var parts []string
	for i, x := range cs {
		if i == 8 || x.per < 0.01 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", x.name, x.per))
	}
	return strings.Join(parts, ", ")
}

// workerAppName is the application_name of the worker's connections.
const workerAppName = "homing_bench_worker"

// serveAppName is the application_name of homing serve's connections in
// the http scenario.
const serveAppName = "homing_bench_serve"

// backendCPU is the CPU time used so far by the PostgreSQL backends serving
// the worker (they live as long as its pool keeps them).
func (e *env) backendCPU(ctx context.Context) (time.Duration, error) {
	return e.backendCPUOf(ctx, workerAppName)
}

// backendCPUOf is backendCPU for the connections named app.
func (e *env) backendCPUOf(ctx context.Context, app string) (time.Duration, error) {
	per, err := e.backendsOf(ctx, app)
	var total time.Duration
	for _, t := range per {
		total += t
	}
	return total, err
}

// backendsOf is the CPU time used so far by each PostgreSQL backend serving
// the connections named app, by pid.
func (e *env) backendsOf(ctx context.Context, app string) (map[int]time.Duration, error) {
	var pids []int
	if err := e.db.WithContext(ctx).Raw("SELECT pid FROM pg_stat_activity WHERE application_name = ?", app).Scan(&pids).Error; err != nil {
		return nil, err
	}
	per := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if t, err := cpuTime(pid); err == nil { // a backend may just have exited
			per[pid] = t
		}
	}
	return per, nil
}

// backendCPUSince is the CPU the worker's backends used since before (a
// backendsOf): a backend that started since counts whole, one that exited
// since counts nothing (rather than taking its earlier CPU off the total,
// as a difference of two sums would).
func (e *env) backendCPUSince(ctx context.Context, before map[int]time.Duration) (time.Duration, error) {
	now, err := e.backendsOf(ctx, workerAppName)
	var total time.Duration
	for pid, t := range now {
		total += t - before[pid]
	}
	return total, err
}

func withDB(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
