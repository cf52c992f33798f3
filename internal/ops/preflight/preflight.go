// Package preflight finds configuration that will lose or stall work
// without failing outright: a Redis that persists nothing or may evict, a
// secrets.key that cannot open the webhooks' secrets, a webhook's queue no
// worker serves, pools that could exhaust PostgreSQL, a mistyped HOMING_*
// variable, a network guard opened to everything. Worker, scheduler and
// serve log each problem as a WARN at start, and /readyz reports the same
// list; homing stats too, except that it judges secrets.key by what the
// running workers report (Reporter), not by its own.
package preflight

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/suggest"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// Problem is one finding: the setting to change and what to change it to.
type Problem struct {
	// Check names the check: redis_persistence, redis_eviction, secrets_key,
	// unserved_queue, connection_budget, unknown_env, allowed_networks.
	Check string `json:"check"`
	// Message says what is wrong and what to change.
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Check + ": " + p.Message }

// Inputs is what the checks read.
type Inputs struct {
	Config config.Config
	DB     *gorm.DB
	// Redis is the connection asynq uses; nil skips the Redis checks.
	Redis asynq.RedisConnOpt
	// Box opens webhook secrets with secrets.key; nil skips that check.
	Box *secretbox.Box
	// Environ is the process environment ("K=V"), for unknown HOMING_*
	// variables.
	Environ []string
	// ServedHere are queues this process serves (a starting worker, which
	// may not be registered in Redis yet).
	ServedHere []string
	// WorkerSecrets judges secrets.key by what the running workers report
	// (Reporter) instead of by Box alone: homing stats runs in a shell
	// whose key says nothing of theirs. Box is then compared with theirs.
	WorkerSecrets bool
}

// checkTimeout bounds one run of the checks.
const checkTimeout = 10 * time.Second

// Run runs every check and returns the problems found, in a stable order.
// A check that cannot run (Redis or the database away, CONFIG disabled) is
// skipped: its absence is not a problem this package reports.
func Run(ctx context.Context, in Inputs) []Problem {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var out []Problem
	out = append(out, UnknownEnv(in.Environ)...)
	out = append(out, openNetworks(in.Config.Delivery.AllowedNetworks)...)
	redisUp := false
	if in.Redis != nil {
		if down := redisDown(ctx, in.Redis); down != nil {
			out = append(out, down...)
		} else {
			redisUp = true
			out = append(out, redisDurability(ctx, in.Redis)...)
			out = append(out, unservedQueues(ctx, in.DB, in.Redis, in.ServedHere)...)
		}
	}
	switch {
	case in.DB == nil:
	case in.WorkerSecrets:
		if redisUp { // else only the redis problem: no worker can be asked
			out = append(out, workerSecrets(ctx, in.DB, in.Redis, in.Box)...)
		}
	case in.Box != nil:
		out = append(out, secretsKey(ctx, in.DB, in.Box)...)
	}
	if in.DB != nil {
		out = append(out, connectionBudget(ctx, in.DB, in.Redis, in.Config.Database.MaxOpenConns)...)
	}
	return out
}

// Log writes each problem as a WARN line.
func Log(log *slog.Logger, problems []Problem) {
	for _, p := range problems {
		log.Warn(p.Message, "check", p.Check)
	}
}

// UnknownEnv reports HOMING_* variables that set no key (HOMING_TEST_* is
// left to the test tools), naming the nearest real key's variable.
func UnknownEnv(environ []string) []Problem {
	keys := config.Config{}.Keys()
	known := make(map[string]string, len(keys))
	for _, k := range keys {
		known[config.EnvName(k)] = k
	}
	var out []Problem
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "HOMING_") || strings.HasPrefix(name, "HOMING_TEST_") {
			continue
		}
		if _, ok := known[name]; ok {
			continue
		}
		best, bestD := "", -1
		for env := range known {
			if d := suggest.Distance(name, env); bestD < 0 || d < bestD || (d == bestD && env < best) {
				best, bestD = env, d
			}
		}
		out = append(out, Problem{Check: "unknown_env", Message: fmt.Sprintf(
			"environment variable %s sets no configuration key and is ignored; did you mean %s (%s)?", name, best, known[best])})
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.Message, b.Message) })
	return out
}

// openNetworks reports a delivery.allowed_networks entry that lets every
// address through, which switches the SSRF guard off.
func openNetworks(prefixes []netip.Prefix) []Problem {
	for _, p := range prefixes {
		if p.Bits() == 0 {
			return []Problem{{Check: "allowed_networks", Message: fmt.Sprintf(
				"delivery.allowed_networks contains %s, which allows every address: receivers can reach your internal services and cloud metadata; list only the private networks your receivers are on", p)}}
		}
	}
	return nil
}

// redisClient is a client of its own on opt, for the checks.
func redisClient(opt asynq.RedisConnOpt) (redis.UniversalClient, bool) {
	c, ok := opt.MakeRedisClient().(redis.UniversalClient)
	return c, ok
}

// redisDown reports a Redis that does not answer a PING: nothing queued
// moves until it is back, and the other Redis checks cannot run.
func redisDown(ctx context.Context, opt asynq.RedisConnOpt) []Problem {
	rdb, ok := redisClient(opt)
	if !ok {
		return nil
	}
	defer func() { _ = rdb.Close() }()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return []Problem{{Check: "redis", Message: fmt.Sprintf(
			"redis is not reachable (%v): no event or delivery task moves until it is; start it, or set HOMING_REDIS_URL to where it runs", err)}}
	}
	return nil
}

// redisDurability reads appendonly, save and maxmemory-policy. A Redis
// that refuses CONFIG (managed services often do) is not reported.
func redisDurability(ctx context.Context, opt asynq.RedisConnOpt) []Problem {
	rdb, ok := redisClient(opt)
	if !ok {
		return nil
	}
	defer func() { _ = rdb.Close() }()
	get := func(key string) (string, bool) {
		m, err := rdb.ConfigGet(ctx, key).Result()
		if err != nil {
			return "", false
		}
		v, ok := m[key]
		return v, ok
	}
	var out []Problem
	aof, ok1 := get("appendonly")
	save, ok2 := get("save")
	if ok1 && ok2 && aof != "yes" && strings.TrimSpace(save) == "" {
		out = append(out, Problem{Check: "redis_persistence", Message: "Redis persists nothing (appendonly no, save \"\"): a restart loses every queued task; " +
			"set appendonly yes (and appendfsync everysec) in redis.conf. Events published through the outbox are re-queued after outbox.recover_after; those published with client.Publish are lost"})
	}
	if policy, ok := get("maxmemory-policy"); ok && policy != "noeviction" {
		out = append(out, Problem{Check: "redis_eviction", Message: fmt.Sprintf(
			"Redis maxmemory-policy is %s: under memory pressure it deletes keys, and those are queued tasks; set maxmemory-policy noeviction", policy)})
	}
	return out
}

// queuesInUse are the queues of enabled webhooks. Served by a scan of
// webhooks, a small table.
func queuesInUse(ctx context.Context, db *gorm.DB) (map[string][]string, error) {
	var rows []struct{ Name, Queue string }
	if err := db.WithContext(ctx).Model(&models.Webhook{}).Select("name, queue").Where("enabled = ?", true).Order("name").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, r := range rows {
		q := cmp.Or(r.Queue, tasks.DefaultQueue)
		out[q] = append(out[q], r.Name)
	}
	return out, nil
}

// ServedQueues are the queues the running workers serve, from asynq's
// server list in Redis, and how many workers there are.
func ServedQueues(opt asynq.RedisConnOpt) (map[string]bool, int, error) {
	insp := asynq.NewInspector(opt)
	defer func() { _ = insp.Close() }()
	servers, err := insp.Servers()
	if err != nil {
		return nil, 0, err
	}
	served := map[string]bool{}
	for _, s := range servers {
		for q := range s.Queues {
			served[q] = true
		}
	}
	return served, len(servers), nil
}

// unservedQueues reports webhooks whose queue no running worker serves:
// their deliveries would wait for ever.
func unservedQueues(ctx context.Context, db *gorm.DB, opt asynq.RedisConnOpt, here []string) []Problem {
	if db == nil {
		return nil
	}
	inUse, err := queuesInUse(ctx, db)
	if err != nil {
		return nil
	}
	served, _, err := ServedQueues(opt)
	if err != nil {
		return nil
	}
	for _, q := range here {
		served[q] = true
	}
	var out []Problem
	for _, q := range slices.Sorted(maps.Keys(inUse)) {
		if served[q] {
			continue
		}
		out = append(out, UnservedQueue(q, inUse[q], served))
	}
	return out
}

// UnservedQueue is the problem of queue q, used by webhooks, that no worker
// in served serves.
func UnservedQueue(q string, webhooks []string, served map[string]bool) Problem {
	names := slices.Sorted(maps.Keys(served))
	have := "no worker is running"
	if len(names) > 0 {
		have = "running workers serve " + strings.Join(names, ", ")
	}
	return Problem{Check: "unserved_queue", Message: fmt.Sprintf(
		"queue %q of webhook %s is served by no running worker (%s): its deliveries wait until one does; add %s=N to worker.queues (HOMING_WORKER_QUEUES) or change the webhook's queue (queue names are case-sensitive)",
		q, strings.Join(webhooks, ", "), have, q)}
}

// signedWebhook is one signed webhook (the first by name), and whether
// there is one. Served by a scan of webhooks that stops at the first.
func signedWebhook(ctx context.Context, db *gorm.DB) (models.Webhook, bool, error) {
	var hooks []models.Webhook
	if err := db.WithContext(ctx).Select("name, secret").Where("secret <> ''").Order("name").Limit(1).Find(&hooks).Error; err != nil {
		return models.Webhook{}, false, err
	}
	if len(hooks) == 0 {
		return models.Webhook{}, false, nil
	}
	return hooks[0], true, nil
}

// secretsKey opens one sealed secret with this process's secrets.key.
func secretsKey(ctx context.Context, db *gorm.DB, box *secretbox.Box) []Problem {
	w, ok, err := signedWebhook(ctx, db)
	if err != nil || !ok {
		return nil
	}
	if !box.HasKey() {
		return []Problem{{Check: "secrets_key", Message: fmt.Sprintf(
			"signed webhooks exist (e.g. %q) but secrets.key is not set: their deliveries cannot be signed and will not be sent; set HOMING_SECRETS_KEY to the key their secrets were sealed with", w.Name)}}
	}
	if _, err := box.Open(w.Secret); err != nil {
		msg := fmt.Sprintf("secrets.key does not open the secret of webhook %q (%v): its deliveries will not be sent; set HOMING_SECRETS_KEY to the key the secrets were sealed with", w.Name, err)
		if errors.Is(err, secretbox.ErrMalformed) {
			msg = fmt.Sprintf("the stored secret of webhook %q is malformed (%v): give it a new one with homing webhook update --secret", w.Name, err)
		}
		return []Problem{{Check: "secrets_key", Message: msg}}
	}
	return nil
}

// connectionBudget compares the pools Homing's processes may open with
// PostgreSQL's max_connections: one pool per running worker (asynq's
// server list), one for a scheduler and one for homing serve, and their two
// LISTEN connections.
func connectionBudget(ctx context.Context, db *gorm.DB, opt asynq.RedisConnOpt, pool int) []Problem {
	if store.DialectOf(db) != store.Postgres || pool <= 0 {
		return nil
	}
	var maxConns, reserved int
	if err := db.WithContext(ctx).Raw("SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int").Row().Scan(&maxConns, &reserved); err != nil {
		return nil
	}
	workers := 1
	if opt != nil {
		if _, n, err := ServedQueues(opt); err == nil && n > workers {
			workers = n
		}
	}
	need := Budget(pool, workers)
	avail := maxConns - reserved
	if need <= avail {
		return nil
	}
	fit := max((avail-2)/(workers+2), 1)
	return []Problem{{Check: "connection_budget", Message: fmt.Sprintf(
		"database.max_open_conns %d × (%d workers + a scheduler + homing serve) + 2 LISTEN = %d connections could exceed PostgreSQL's max_connections %d (%d reserved for superusers): "+
			"lower database.max_open_conns to %d or less, or raise max_connections (docs/operations.md, PostgreSQL)", pool, workers, need, maxConns, reserved, fit)}}
}

// Budget is how many PostgreSQL connections a deployment may open at most:
// a pool for each worker, a scheduler and homing serve, and the LISTEN
// connection of the two relays.
func Budget(pool, workers int) int { return pool*(workers+2) + 2 }

// Cached runs the checks at most once per ttl, for /readyz.
type Cached struct {
	in  Inputs
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	at   time.Time
	last []Problem
}

// NewCached caches Run(in) for ttl, timed by now.
func NewCached(in Inputs, ttl time.Duration, now func() time.Time) *Cached {
	return &Cached{in: in, ttl: ttl, now: now}
}

// Problems returns the problems found within the last ttl.
func (c *Cached) Problems(ctx context.Context) []Problem {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || c.now().Sub(c.at) >= c.ttl {
		c.last = Run(ctx, c.in)
		if c.last == nil {
			c.last = []Problem{}
		}
		c.at = c.now()
	}
	return c.last
}
