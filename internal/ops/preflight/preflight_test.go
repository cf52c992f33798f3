package preflight_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/internal/testing/testenv"
)

func checks(ps []preflight.Problem) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		out[p.Check] += p.Message + "\n"
	}
	return out
}

func TestUnknownEnvNamesTheNearestKey(t *testing.T) {
	t.Parallel()
	ps := preflight.UnknownEnv([]string{"HOMING_REDIS_URL=redis://x", "HOMING_WORKER_CONCURENCY=8", "HOMING_TEST_DATABASE_URL=x", "PATH=/bin", "HOMING_SECRET_KEY=abc"})
	if len(ps) != 2 {
		t.Fatalf("problems = %v, want the two mistyped variables", ps)
	}
	for _, want := range []string{"HOMING_WORKER_CONCURENCY sets no configuration key and is ignored; did you mean HOMING_WORKER_CONCURRENCY (worker.concurrency)?",
		"HOMING_SECRET_KEY sets no configuration key and is ignored; did you mean HOMING_SECRETS_KEY (secrets.key)?"} {
		if !strings.Contains(ps[0].Message+ps[1].Message, want) {
			t.Errorf("problems %v do not say %q", ps, want)
		}
	}
}

func TestAllowedNetworksOpenToEverything(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"0.0.0.0/0", "::/0"} {
		cfg := config.Default()
		cfg.Delivery.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix(p)}
		got := checks(preflight.Run(context.Background(), preflight.Inputs{Config: cfg}))
		if !strings.Contains(got["allowed_networks"], p) {
			t.Errorf("allowed_networks %s: problems %v", p, got)
		}
	}
	cfg := config.Default()
	cfg.Delivery.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	if got := preflight.Run(context.Background(), preflight.Inputs{Config: cfg}); len(got) != 0 {
		t.Errorf("a private network: %v", got)
	}
}

// ownRedis starts a redis-server with args on a free loopback port.
func ownRedis(t *testing.T, args ...string) asynq.RedisClientOpt {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("redis-server not installed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	opt := asynq.RedisClientOpt{Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	rdb := redis.NewClient(&redis.Options{Addr: opt.Addr})
	defer func() { _ = rdb.Close() }()
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer within 20s")
		}
		time.Sleep(20 * time.Millisecond) // polling a starting server with a deadline
	}
	return opt
}

func TestRedisThatKeepsNothingOrEvicts(t *testing.T) {
	t.Parallel()
	careless := ownRedis(t, "--appendonly", "no", "--save", "", "--maxmemory-policy", "allkeys-lru")
	got := checks(preflight.Run(context.Background(), preflight.Inputs{Config: config.Default(), Redis: careless}))
	if !strings.Contains(got["redis_persistence"], "appendonly yes") || !strings.Contains(got["redis_eviction"], "allkeys-lru") || !strings.Contains(got["redis_eviction"], "noeviction") {
		t.Errorf("a Redis that persists nothing and evicts: %v", got)
	}
	careful := ownRedis(t, "--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction")
	if got := preflight.Run(context.Background(), preflight.Inputs{Config: config.Default(), Redis: careful}); len(got) != 0 {
		t.Errorf("a durable Redis: %v", got)
	}
	// CONFIG renamed away (managed Redis): nothing to say, and no error.
	locked := ownRedis(t, "--appendonly", "no", "--save", "", "--rename-command", "CONFIG", "")
	if got := preflight.Run(context.Background(), preflight.Inputs{Config: config.Default(), Redis: locked}); len(got) != 0 {
		t.Errorf("a Redis without CONFIG: %v", got)
	}
}

func TestSecretsKeyAndUnservedQueues(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	redisOpt, _ := testenv.Redis(t)
	sealing, _ := secretbox.GenerateKey()
	box, err := secretbox.New(sealing)
	if err != nil {
		t.Fatal(err)
	}
	svc := webhook.New(db, box, clock.Real{}, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	name, doctype, event, url, secret, queue := "orders", "Sales Order", "on_submit", "https://erp.example.com/h", "a-signing-secret-123456", "critical"
	if _, err := svc.Create(context.Background(), "", webhook.Input{Name: &name, DocType: &doctype, Event: &event, URL: &url, Secret: &secret, Queue: &queue}); err != nil {
		t.Fatal(err)
	}
	run := func(b *secretbox.Box, here ...string) map[string]string {
		return checks(preflight.Run(context.Background(), preflight.Inputs{Config: config.Default(), DB: db, Redis: redisOpt, Box: b, ServedHere: here}))
	}
	none, _ := secretbox.New("")
	otherKey, _ := secretbox.GenerateKey()
	other, _ := secretbox.New(otherKey)
	if got := run(none)["secrets_key"]; !strings.Contains(got, "secrets.key is not set") || !strings.Contains(got, `"orders"`) {
		t.Errorf("no secrets.key: %q", got)
	}
	if got := run(other)["secrets_key"]; !strings.Contains(got, "does not open the secret of webhook \"orders\"") {
		t.Errorf("a wrong secrets.key: %q", got)
	}
	got := run(box)
	if got["secrets_key"] != "" {
		t.Errorf("the right secrets.key: %q", got["secrets_key"])
	}
	if !strings.Contains(got["unserved_queue"], `queue "critical" of webhook orders is served by no running worker`) {
		t.Errorf("unserved queue: %v", got)
	}
	// A worker serving "default" only (Critical ≠ critical) leaves it unserved.
	srv := asynq.NewServer(redisOpt, asynq.Config{Queues: map[string]int{"default": 1, "Critical": 1}, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = run(box)
		if strings.Contains(got["unserved_queue"], "running workers serve Critical, default") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // waiting for the server's heartbeat, with a deadline
	}
	if !strings.Contains(got["unserved_queue"], "running workers serve Critical, default") || !strings.Contains(got["unserved_queue"], "add critical=N to worker.queues") {
		t.Errorf("unserved queue beside a worker: %v", got)
	}
	if got := run(box, "critical"); got["unserved_queue"] != "" {
		t.Errorf("a worker starting on critical: %v", got)
	}
}

func TestConnectionBudget(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	cfg := config.Default()
	cfg.Database.MaxOpenConns = 40
	got := checks(preflight.Run(context.Background(), preflight.Inputs{Config: cfg, DB: db}))
	if !strings.Contains(got["connection_budget"], "database.max_open_conns 40 × (1 workers + a scheduler + homing serve) + 2 LISTEN = 122") {
		t.Errorf("pools of 40: %v", got)
	}
	cfg.Database.MaxOpenConns = 6
	if got := checks(preflight.Run(context.Background(), preflight.Inputs{Config: cfg, DB: db})); got["connection_budget"] != "" {
		t.Errorf("pools of 6: %v", got)
	}
	if n := preflight.Budget(6, 10); n > 97 {
		t.Errorf("the shipped autoscaler (10 workers) at the default pool needs %d connections, more than PostgreSQL's default 100 minus 3 reserved", n)
	}
}

// A Redis that does not answer is one problem that says what to do, and the
// checks that need it are not run (each would only fail the same way).
func TestRedisThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	got := preflight.Run(context.Background(), preflight.Inputs{Config: config.Default(), Redis: asynq.RedisClientOpt{Addr: addr}})
	if len(got) != 1 || got[0].Check != "redis" || !strings.Contains(got[0].Message, "not reachable") || !strings.Contains(got[0].Message, "HOMING_REDIS_URL") {
		t.Errorf("problems with no Redis at %s: %v, want one redis problem naming HOMING_REDIS_URL", addr, got)
	}
}
