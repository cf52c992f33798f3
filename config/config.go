// Package config reads Homing's configuration once: an optional YAML file,
// overridden by HOMING_* environment variables, over defaults; then validates
// it with errors that name the key and say what to fix. There is no global
// config: main parses it and passes the struct (or its parts) down.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// Config is Homing's whole configuration. The zero value is not useful: start
// from Default or Load.
type Config struct {
	Redis     Redis
	Database  Database
	Retry     Retry
	Sweeper   Sweeper
	Delivery  Delivery
	Worker    Worker
	Log       Log
	Secrets   Secrets
	Metrics   Metrics
	Retention Retention
	Health    Health
	Outbox    Outbox
	API       API
	Monitor   Monitor
	Process   Process
	OpsEvents OpsEvents
	Tracing   Tracing
}

// Tracing is what Homing does with OpenTelemetry traces beyond what the
// standard OTEL_* variables say (tracing is on only when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set).
type Tracing struct {
	// PropagateToReceivers (tracing.propagate_to_receivers) sends each
	// attempt's W3C traceparent (and tracestate) to the receiver; false
	// keeps the trace inside Homing, for receivers that must not learn it.
	PropagateToReceivers bool
}

// OpsEvents is how Homing publishes its own operational events (doc_type
// "Homing Webhook": failing, recovered, disabled, exhausted) into each
// webhook's tenant.
type OpsEvents struct {
	// CopyTo (ops_events.copy_to) is a tenant that also receives every
	// other tenant's operational events, each naming its source_tenant;
	// "" copies none.
	CopyTo string
	// ConsoleURL (ops_events.console_url) is the console's public base
	// URL (https://homing.example.com), put in front of each event's link
	// to its webhook or delivery page; "" leaves the link a path.
	ConsoleURL string
}

// Process bounds the whole process, whatever it runs.
type Process struct {
	// MemoryLimit (process.memory_limit) is the Go runtime's soft memory
	// limit in bytes, set at start when the GOMEMLIMIT variable is not (which
	// wins); 0 sets none. The collector works harder as the heap nears it,
	// and evaluations of definitions stop, to be retried later, once the heap
	// passes 90% of it (delivery's heap ceiling), so that no definition can
	// take the process down.
	MemoryLimit int64
}

// API is where `homing serve` answers HTTP requests.
type API struct {
	// Addr (api.addr) is the listen address, host:port: loopback by
	// default, for a TLS-terminating proxy on the same machine.
	Addr string
	// MaxBodyBytes (api.max_body_bytes) refuses larger request bodies with
	// 413 before they are read. It must leave room for a document of
	// delivery.max_payload_bytes inside its JSON envelope.
	MaxBodyBytes int
	// MaxInflightBytes (api.max_inflight_bytes) is the memory all requests
	// in flight may hold together: each is charged its body's length times
	// a measured expansion factor before the body is read, and one that
	// does not fit is answered 503 with Retry-After. 0 is half of the
	// process's memory limit (process.memory_limit or GOMEMLIMIT), or
	// 512MiB when there is none.
	MaxInflightBytes int64
	// TenantInflightShare (api.tenant_inflight_share) is the fraction of
	// MaxInflightBytes one tenant's requests in flight may hold together
	// (above 0, at most 1): past it the tenant's next request is refused
	// with 429 tenant_share_full, so one tenant's slow bodies cannot
	// refuse every other tenant's requests.
	TenantInflightShare float64
	// AsynqmonURL (api.asynqmon_url) is where operators reach asynqmon; when
	// set, the console links a delivery to its task there.
	AsynqmonURL string
}

// Outbox paces the relay that moves committed outbox events into asynq.
type Outbox struct {
	// PollInterval (outbox.poll_interval) is the relay's fallback poll: on
	// PostgreSQL it is woken by NOTIFY within milliseconds and polls only in
	// case a notification was missed; on SQLite polling is all it does.
	PollInterval time.Duration
	// RecoverAfter (outbox.recover_after): an event queued in Redis this
	// long ago and still not fanned out has its task's state looked up in
	// Redis; a task that is missing (lost with Redis's data) or archived is
	// queued again, one that still waits or runs is left alone.
	RecoverAfter time.Duration
}

// Monitor protects `homing monitor`'s UI.
type Monitor struct {
	// Auth (monitor.auth) is required of every request when set: "bearer:
	// TOKEN" for an Authorization: Bearer header, or "basic:USER:PASSWORD"
	// for HTTP basic auth. Empty serves the UI without authentication
	// (it binds 127.0.0.1 by default).
	Auth string
}

// Health disables endpoints that only fail.
type Health struct {
	// DisableAfter (health.disable_after): a webhook whose deliveries have
	// only failed for this long is disabled and its pending retries are
	// exhausted; 0 turns this off.
	DisableAfter time.Duration
	// ProbeInterval (health.probe_interval) is the longest gap between
	// a failing webhook's probes, sent one at a time while its other
	// retries wait: the gaps start at 1s and double up to it.
	ProbeInterval time.Duration
}

// Retention says how long final deliveries are kept before the periodic
// retention task deletes them. Failed deliveries are never deleted.
type Retention struct {
	Delivered time.Duration // retention.delivered
	Exhausted time.Duration // retention.exhausted
	Pause     time.Duration // retention.pause: the wait after each batch of 500 (0: none)
}

// Redis is where asynq keeps its queues.
// Sentinel and Cluster, when set, take precedence over URL (whose password,
// database and TLS scheme still apply).
type Redis struct {
	URL      string // redis.url
	Sentinel RedisSentinel
	Cluster  RedisCluster
}

// RedisSentinel names a primary managed by Redis Sentinel.
type RedisSentinel struct {
	Master string   // redis.sentinel.master
	Addrs  []string // redis.sentinel.addrs: host:port of the sentinels
}

// RedisCluster lists seed nodes of a Redis Cluster. asynq keeps each queue on
// one cluster node, so spread load with several queues.
type RedisCluster struct {
	Addrs []string // redis.cluster.addrs
}

// Database is where webhooks and deliveries live.
type Database struct {
	URL         string // database.url: sqlite://FILE or postgres://…
	AutoMigrate bool   // database.auto_migrate: run migrations at start-up
	// MaxOpenConns (database.max_open_conns) caps each process's PostgreSQL
	// connections; every worker.concurrency slot needs one only for the few
	// milliseconds of its statements. SQLite always uses one.
	MaxOpenConns int
}

// Retry is the gap before each retry and the attempt budget of webhooks that
// set none.
type Retry struct {
	Schedule          []time.Duration // retry.schedule, clamped at its last entry
	DefaultMaxRetries int             // retry.default_max_retries
}

// Sweeper paces the sweep that enqueues due retries.
type Sweeper struct {
	Interval  time.Duration // sweeper.interval
	BatchSize int           // sweeper.batch_size: most rows one sweep step enqueues
	// MaxPending (sweeper.max_pending) is each retry queue's high-water
	// mark: a tick keeps taking batches while a queue holds fewer pending
	// tasks. 0 is derived: the larger of batch_size and 4 × concurrency.
	MaxPending int
}

// PendingMark is sweeper.max_pending as the sweep uses it.
func (c Config) PendingMark() int {
	if c.Sweeper.MaxPending > 0 {
		return c.Sweeper.MaxPending
	}
	return max(c.Sweeper.BatchSize, 4*c.Worker.Concurrency)
}

// Delivery bounds outgoing requests.
type Delivery struct {
	Timeout              time.Duration  // delivery.timeout, per attempt
	AllowPrivateNetworks bool           // delivery.allow_private_networks
	AllowedNetworks      []netip.Prefix // delivery.allowed_networks: CIDRs reachable despite the guard
	MaxPayloadBytes      int            // delivery.max_payload_bytes
	// TemplateTimeLimit and ConditionTimeLimit
	// (delivery.template_time_limit, delivery.condition_time_limit) bound
	// one evaluation of a body or URL template and of a condition in
	// wall-clock time: the one limit that depends on the machine, so the
	// one an operator may need to move (README, "Limits").
	TemplateTimeLimit  time.Duration
	ConditionTimeLimit time.Duration
}

// Worker sizes the asynq server.
type Worker struct {
	Concurrency int // worker.concurrency
	// Queues (worker.queues) maps queue name to priority. Viper lower-cases
	// map keys read from YAML, so queue names are best kept lower case.
	Queues          map[string]int
	ShutdownTimeout time.Duration // worker.shutdown_timeout
	// TaskCheckInterval (worker.task_check_interval) is how long an idle
	// worker waits before polling empty queues again: the latency an event
	// meets on an idle system, against one Redis call per interval.
	TaskCheckInterval time.Duration
	// TenantShare (worker.tenant_share) is the fraction of Concurrency one
	// tenant other than the default may have at its receivers at once in
	// a worker (above 0, at most 1; at least one request): past it the
	// tenant's attempts wait, so that one tenant's receivers that never
	// answer cannot hold every slot of a queue other tenants share.
	TenantShare float64
}

// TenantRequests is how many requests one tenant may have at its
// receivers at once in a worker: TenantShare of Concurrency, at least one;
// 0 (no bound) when the share is 1.
func (w Worker) TenantRequests() int {
	if w.TenantShare >= 1 {
		return 0
	}
	return max(1, int(math.Ceil(float64(w.Concurrency)*w.TenantShare)))
}

// Log configures the process logger.
type Log struct {
	Level  string // log.level: debug, info, warn or error
	Format string // log.format: auto (text on a terminal, else json), json or text
}

// Secrets holds the key webhook secrets are sealed with. It is checked by
// package secretbox, which knows the format.
type Secrets struct {
	Key string // secrets.key
}

// Metrics is where the worker serves Prometheus metrics.
type Metrics struct {
	// Addr (metrics.addr) is where /metrics, /healthz and /readyz answer,
	// loopback by default: they need no token. Empty disables them.
	Addr string
	// MaxWebhookLabels is metrics.max_webhook_labels: how many webhooks get
	// a webhook label of their own on the delivery and attempt counters;
	// the rest share webhook="other", so a site with thousands of webhooks
	// cannot blow up the number of series.
	MaxWebhookLabels int
	// MaxTenantLabels is metrics.max_tenant_labels: how many tenants get a
	// tenant label of their own on the same counters; the rest share
	// tenant="other", so a SaaS with thousands of customers stays bounded.
	MaxTenantLabels int
	// MaxWebhookLabelsPerTenant is metrics.max_webhook_labels_per_tenant:
	// how many of those webhook labels one tenant other than default may
	// take (0: no cap of its own), so that one tenant creating or renaming
	// webhooks cannot take every other tenant's.
	MaxWebhookLabelsPerTenant int
	// ScrapeCache (metrics.scrape_cache) is how long one collection
	// answers scrapes: a collection reads the database and Redis, and
	// scrapers, however many, cost at most one a ScrapeCache (and one at
	// a time). 0 collects for every scrape.
	ScrapeCache time.Duration
}

// KeyError is a problem with one key. Load and Validate return these, joined
// with errors.Join, so a caller can report or pick out every wrong key.
type KeyError struct {
	Key string // dotted key, e.g. "sweeper.batch_size"
	Env string // the variable the value came from, when it came from the environment
	Err error
}

func (e *KeyError) Error() string {
	if e.Env != "" {
		return fmt.Sprintf("%s (from %s): %v", e.Key, e.Env, e.Err)
	}
	return e.Key + ": " + e.Err.Error()
}

func (e *KeyError) Unwrap() error { return e.Err }

// field is one supported key: its default and how a raw value (from YAML, or
// a string from the environment) lands in a Config. Keeping the three together
// means a key cannot be added with a default but no parser, or vice versa.
type field struct {
	key string
	def any
	set func(c *Config, raw any) error
}

// fields lists every supported key in Config's order. It is a function, not a
// package variable, so there is no package state for anyone to mutate.
func fields() []field {
	return []field{
		{"redis.url", "redis://127.0.0.1:6379/0", into(parseString, func(c *Config) *string { return &c.Redis.URL })},
		{"redis.sentinel.master", "", into(parseString, func(c *Config) *string { return &c.Redis.Sentinel.Master })},
		{"redis.sentinel.addrs", "", into(parseStrings, func(c *Config) *[]string { return &c.Redis.Sentinel.Addrs })},
		{"redis.cluster.addrs", "", into(parseStrings, func(c *Config) *[]string { return &c.Redis.Cluster.Addrs })},
		{"database.url", "", into(parseString, func(c *Config) *string { return &c.Database.URL })},
		{"database.auto_migrate", true, into(parseBool, func(c *Config) *bool { return &c.Database.AutoMigrate })},
		{"database.max_open_conns", 6, into(parseInt, func(c *Config) *int { return &c.Database.MaxOpenConns })},
		{"retry.schedule", "5m,30m,2h,5h,10h,10h", into(parseDurations, func(c *Config) *[]time.Duration { return &c.Retry.Schedule })},
		{"retry.default_max_retries", 3, into(parseInt, func(c *Config) *int { return &c.Retry.DefaultMaxRetries })},
		{"sweeper.interval", "5s", into(parseDuration, func(c *Config) *time.Duration { return &c.Sweeper.Interval })},
		{"sweeper.batch_size", 500, into(parseInt, func(c *Config) *int { return &c.Sweeper.BatchSize })},
		{"sweeper.max_pending", 0, into(parseInt, func(c *Config) *int { return &c.Sweeper.MaxPending })},
		{"delivery.timeout", "5s", into(parseDuration, func(c *Config) *time.Duration { return &c.Delivery.Timeout })},
		{"delivery.allowed_networks", "", into(parsePrefixes, func(c *Config) *[]netip.Prefix { return &c.Delivery.AllowedNetworks })},
		{"delivery.allow_private_networks", false, into(parseBool, func(c *Config) *bool { return &c.Delivery.AllowPrivateNetworks })},
		{"delivery.max_payload_bytes", 1 << 20, into(parseInt, func(c *Config) *int { return &c.Delivery.MaxPayloadBytes })},
		{"delivery.template_time_limit", "1s", into(parseDuration, func(c *Config) *time.Duration { return &c.Delivery.TemplateTimeLimit })},
		{"delivery.condition_time_limit", "500ms", into(parseDuration, func(c *Config) *time.Duration { return &c.Delivery.ConditionTimeLimit })},
		{"worker.concurrency", 50, into(parseInt, func(c *Config) *int { return &c.Worker.Concurrency })},
		{"worker.queues", "default=1", into(parseQueues, func(c *Config) *map[string]int { return &c.Worker.Queues })},
		{"worker.shutdown_timeout", "30s", into(parseDuration, func(c *Config) *time.Duration { return &c.Worker.ShutdownTimeout })},
		{"worker.task_check_interval", "10ms", into(parseDuration, func(c *Config) *time.Duration { return &c.Worker.TaskCheckInterval })},
		{"worker.tenant_share", 0.25, into(parseFloat, func(c *Config) *float64 { return &c.Worker.TenantShare })},
		{"log.level", "info", into(parseString, func(c *Config) *string { return &c.Log.Level })},
		{"log.format", "auto", into(parseString, func(c *Config) *string { return &c.Log.Format })},
		{"secrets.key", "", into(parseString, func(c *Config) *string { return &c.Secrets.Key })},
		{"retention.delivered", "720h", into(parseDuration, func(c *Config) *time.Duration { return &c.Retention.Delivered })},
		{"retention.exhausted", "2160h", into(parseDuration, func(c *Config) *time.Duration { return &c.Retention.Exhausted })},
		{"retention.pause", "50ms", into(parseDuration, func(c *Config) *time.Duration { return &c.Retention.Pause })},
		{"health.disable_after", "120h", into(parseDuration, func(c *Config) *time.Duration { return &c.Health.DisableAfter })},
		{"health.probe_interval", "10s", into(parseDuration, func(c *Config) *time.Duration { return &c.Health.ProbeInterval })},
		{"metrics.addr", "127.0.0.1:9464", into(parseString, func(c *Config) *string { return &c.Metrics.Addr })},
		{"metrics.max_webhook_labels", 100, into(parseInt, func(c *Config) *int { return &c.Metrics.MaxWebhookLabels })},
		{"metrics.max_tenant_labels", 100, into(parseInt, func(c *Config) *int { return &c.Metrics.MaxTenantLabels })},
		{"metrics.max_webhook_labels_per_tenant", 25, into(parseInt, func(c *Config) *int { return &c.Metrics.MaxWebhookLabelsPerTenant })},
		{"metrics.scrape_cache", "1s", into(parseDuration, func(c *Config) *time.Duration { return &c.Metrics.ScrapeCache })},
		{"outbox.poll_interval", "1s", into(parseDuration, func(c *Config) *time.Duration { return &c.Outbox.PollInterval })},
		{"api.addr", "127.0.0.1:8088", into(parseString, func(c *Config) *string { return &c.API.Addr })},
		{"api.max_body_bytes", 2 << 20, into(parseInt, func(c *Config) *int { return &c.API.MaxBodyBytes })},
		{"api.asynqmon_url", "", into(parseString, func(c *Config) *string { return &c.API.AsynqmonURL })},
		{"ops_events.copy_to", "", into(parseString, func(c *Config) *string { return &c.OpsEvents.CopyTo })},
		{"ops_events.console_url", "", into(parseString, func(c *Config) *string { return &c.OpsEvents.ConsoleURL })},
		{"api.max_inflight_bytes", "0", into(parseBytes, func(c *Config) *int64 { return &c.API.MaxInflightBytes })},
		// Tenants' trust (issue 35).
		{"api.tenant_inflight_share", 0.25, into(parseFloat, func(c *Config) *float64 { return &c.API.TenantInflightShare })},
		// Durable intake and operator defaults (issue 16).
		{"outbox.recover_after", "30s", into(parseDuration, func(c *Config) *time.Duration { return &c.Outbox.RecoverAfter })},
		{"monitor.auth", "", into(parseString, func(c *Config) *string { return &c.Monitor.Auth })},
		// The process's backstop (issue 25).
		{"process.memory_limit", "1GiB", into(parseBytes, func(c *Config) *int64 { return &c.Process.MemoryLimit })},
		// Traces (issue 37, part 2).
		{"tracing.propagate_to_receivers", true, into(parseBool, func(c *Config) *bool { return &c.Tracing.PropagateToReceivers })},
	}
}

// into adapts a parser and a field selector into a field setter.
func into[T any](parse func(any) (T, error), at func(*Config) *T) func(*Config, any) error {
	return func(c *Config, raw any) error {
		v, err := parse(raw)
		if err != nil {
			return err
		}
		*at(c) = v
		return nil
	}
}

// Keys lists every supported dotted key, in the order of Config's fields. It
// does not depend on c; it is a method so callers holding a Config find it.
func (c Config) Keys() []string {
	table := fields()
	keys := make([]string, len(table))
	for i, f := range table {
		keys[i] = f.key
	}
	return keys
}

// EnvName is the environment variable that sets a key: "redis.url" becomes
// "HOMING_REDIS_URL".
func EnvName(key string) string {
	return "HOMING_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Default is the configuration when nothing is set. It is valid.
func Default() Config {
	var c Config
	for _, f := range fields() {
		if err := f.set(&c, f.def); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", f.key, err)) // the table is constant: a programming error
		}
	}
	c.Database.URL = "sqlite://" + DefaultSQLitePath(nil)
	return c
}

// DefaultSQLitePath is the database file used when database.url is not set:
// per user and absolute, so the commands find the same database whatever
// directory they run in. It is $XDG_DATA_HOME/homing/homing.db, or
// ~/.local/share/homing/homing.db when XDG_DATA_HOME is unset or relative
// (as the XDG base directory specification says). environ holds the
// variables ("K=V"); without HOME there, the process's home directory is
// used, and without one at all, homing.db in the working directory.
func DefaultSQLitePath(environ []string) string {
	lookup := func(name string) string {
		v := ""
		for _, kv := range environ {
			if k, val, ok := strings.Cut(kv, "="); ok && k == name {
				v = val // the last one wins, as in a shell
			}
		}
		return v
	}
	if x := lookup("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "homing", "homing.db")
	}
	home := lookup("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return "homing.db"
	}
	return filepath.Join(home, ".local", "share", "homing", "homing.db")
}

// Load reads the YAML file at path ("" for none), then the process
// environment, over the defaults, and validates the result. See LoadFrom.
func Load(path string) (Config, error) { return LoadFrom(path, os.Environ()) }

// LoadFrom is Load with an explicit environment ("K=V" entries), so tests and
// tools need not touch the process environment.
//
// Precedence, lowest first: defaults, the file, HOMING_<KEY> variables. A key
// unknown in the file is an error (it is most likely a typo); other HOMING_*
// variables are ignored, since tools share the prefix (HOMING_TEST_*). An
// empty variable counts as set, so HOMING_METRICS_ADDR= disables metrics.
//
// Viper reads the environment only through os.LookupEnv, so AutomaticEnv and
// BindEnv would read the process environment and ignore environ. Instead each
// key's variable is looked up in environ and given to viper with Set, its
// highest layer: the same precedence, and every env-only key is seen.
//
// All problems are reported at once, each a *KeyError naming its key.
func LoadFrom(path string, environ []string) (Config, error) {
	table := fields()
	v := viper.New()
	if path != "" {
		if err := readFile(v, path, table); err != nil {
			return Config{}, err
		}
	}
	for _, f := range table {
		v.SetDefault(f.key, f.def)
	}

	env := envMap(environ)
	c := Default()
	var problems []error
	for _, f := range table {
		name := EnvName(f.key)
		val, fromEnv := env[name]
		if fromEnv {
			v.Set(f.key, val)
		}
		raw := v.Get(f.key)
		if raw == nil { // "key: ~" in YAML: keep the default
			raw = f.def
		}
		if err := f.set(&c, raw); err != nil {
			ke := &KeyError{Key: f.key, Err: err}
			if fromEnv {
				ke.Env = name
			}
			problems = append(problems, ke)
		}
	}
	if c.Database.URL == "" {
		c.Database.URL = "sqlite://" + DefaultSQLitePath(environ)
	}
	// A key that did not parse keeps its valid default, so Validate adds
	// nothing about it: each wrong key is reported once, as written.
	for _, ke := range c.problems() {
		problems = append(problems, ke)
	}
	if len(problems) > 0 {
		return Config{}, errors.Join(problems...)
	}
	return c, nil
}

// readFile loads the YAML file into v and rejects keys no field knows.
// It runs before any default is set, so v.AllKeys holds the file's keys only.
func readFile(v *viper.Viper, path string, table []field) error {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("config file %q does not exist (give an existing file, or none to use defaults and HOMING_* variables): %w", path, err)
		}
		return fmt.Errorf("config file %q: %w", path, err)
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return fmt.Errorf("config file %q: %w", path, err)
	}

	known := make(map[string]bool, len(table))
	sections := map[string]bool{}
	for _, f := range table {
		known[f.key] = true
		section, _, _ := strings.Cut(f.key, ".")
		sections[section] = true
	}
	var problems []error
	for _, k := range v.AllKeys() {
		switch {
		case known[k], strings.HasPrefix(k, "worker.queues."): // a YAML map of queues
		case sections[k] && v.Get(k) == nil: // an empty section, "sweeper:"
		case sections[k]:
			problems = append(problems, fmt.Errorf("config file %q: %q is a section, not a value: set its keys instead (%s)", path, k, strings.Join(keysIn(table, k), ", ")))
		default:
			problems = append(problems, fmt.Errorf("config file %q: unknown key %q (supported keys: %s)", path, k, strings.Join(Config{}.Keys(), ", ")))
		}
	}
	return errors.Join(problems...)
}

func keysIn(table []field, section string) []string {
	var out []string
	for _, f := range table {
		if strings.HasPrefix(f.key, section+".") {
			out = append(out, f.key)
		}
	}
	return out
}

// envMap turns "K=V" entries into a map; a later entry wins, as with setenv.
func envMap(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "HOMING_") {
			env[k] = val
		}
	}
	return env
}

const durationHint = "(use values like 5m, 2h)"

// parseString accepts any scalar; "metrics.addr: 9464" would otherwise be a
// type error rather than the clearer validation error about its form.
func parseString(raw any) (string, error) {
	switch x := raw.(type) {
	case string:
		return x, nil
	case []any, map[string]any:
		return "", fmt.Errorf("must be a single value, got %v", x)
	default:
		return fmt.Sprint(x), nil
	}
}

// parsePrefixes reads CIDRs (a list or one comma-separated string).
func parsePrefixes(raw any) ([]netip.Prefix, error) {
	items, err := parseStrings(raw)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, s := range items {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.1.0.0/16 or fd00::/8", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// parseStrings reads a YAML list or one comma-separated string.
func parseStrings(raw any) ([]string, error) {
	var items []string
	switch x := raw.(type) {
	case nil:
	case string:
		items = strings.Split(x, ",")
	case []string:
		items = x
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%v is not a string: give host:port entries", e)
			}
			items = append(items, s)
		}
	default:
		return nil, fmt.Errorf("give a list of host:port or one comma-separated string")
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

func parseBool(raw any) (bool, error) {
	switch x := raw.(type) {
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			return false, fmt.Errorf("%q is not true or false", x)
		}
		return b, nil
	}
	return false, fmt.Errorf("%v is not true or false", raw)
}

// parseBytes reads a size: a number of bytes, or one with a KiB, MiB or
// GiB suffix (as GOMEMLIMIT writes it).
func parseBytes(raw any) (int64, error) {
	if s, ok := raw.(string); ok {
		s = strings.TrimSpace(s)
		for _, u := range []struct {
			suffix string
			shift  uint
		}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}} {
			if num, found := strings.CutSuffix(s, u.suffix); found {
				n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
				if err != nil || n < 0 || n > math.MaxInt64>>u.shift {
					return 0, fmt.Errorf("%q is not a size (use values like 1GiB, 512MiB or a number of bytes)", s)
				}
				return n << u.shift, nil
			}
		}
	}
	n, err := parseInt(raw)
	if err != nil {
		return 0, fmt.Errorf("%v is not a size (use values like 1GiB, 512MiB or a number of bytes)", raw)
	}
	return int64(n), nil
}

func parseInt(raw any) (int, error) {
	switch x := raw.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case uint64:
		return int(x), nil
	case float64:
		if x == float64(int(x)) {
			return int(x), nil
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, nil
		}
		return 0, fmt.Errorf("%q is not a whole number", x)
	}
	return 0, fmt.Errorf("%v is not a whole number", raw)
}

func parseFloat(raw any) (float64, error) {
	switch x := raw.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, nil
		}
		return 0, fmt.Errorf("%q is not a number (use a fraction such as 0.25)", x)
	}
	return 0, fmt.Errorf("%v is not a number (use a fraction such as 0.25)", raw)
}

func parseDuration(raw any) (time.Duration, error) {
	switch x := raw.(type) {
	case time.Duration:
		return x, nil
	case string, int, int64, float64:
		s := strings.TrimSpace(fmt.Sprint(x))
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration %s", s, durationHint)
		}
		return d, nil
	}
	return 0, fmt.Errorf("%v is not a duration %s", raw, durationHint)
}

// parseDurations accepts a YAML list or one comma-separated string, and
// reports every entry that is not a duration.
func parseDurations(raw any) ([]time.Duration, error) {
	var items []any
	switch x := raw.(type) {
	case string:
		if strings.TrimSpace(x) != "" {
			for _, s := range strings.Split(x, ",") {
				items = append(items, s)
			}
		}
	case []any:
		items = x
	case []string:
		for _, s := range x {
			items = append(items, s)
		}
	case []time.Duration:
		return slices.Clone(x), nil
	default:
		return nil, fmt.Errorf("%v: give a list of durations or one comma-separated string like 5m,30m,2h", raw)
	}
	out := make([]time.Duration, 0, len(items))
	var errs []error
	for _, item := range items {
		d, err := parseDuration(item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	if len(errs) > 0 {
		return nil, joinLine(errs)
	}
	return out, nil
}

const queuesHint = "(use name=priority, e.g. default=6,low=1)"

// parseQueues accepts a YAML map {default: 6, low: 1} or the string
// "default=6,low=1". Priorities are checked for being whole numbers here
// and for being positive in Validate, which also sees hand-built configs.
func parseQueues(raw any) (map[string]int, error) {
	out := map[string]int{}
	var errs []error
	add := func(name string, prio any) {
		name = strings.TrimSpace(name)
		entry := fmt.Sprintf("%s=%v", name, prio)
		n, err := parseInt(prio)
		switch {
		case name == "":
			errs = append(errs, fmt.Errorf("%q: the queue name is empty %s", entry, queuesHint))
		case err != nil:
			errs = append(errs, fmt.Errorf("%q: priority must be a positive integer", entry))
		default:
			if _, dup := out[name]; dup {
				errs = append(errs, fmt.Errorf("%q: queue %q is given twice", entry, name))
			}
			out[name] = n
		}
	}
	switch x := raw.(type) {
	case string:
		for _, part := range strings.Split(x, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, prio, ok := strings.Cut(part, "=")
			if !ok {
				errs = append(errs, fmt.Errorf("%q: no priority %s", part, queuesHint))
				continue
			}
			add(name, strings.TrimSpace(prio))
		}
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(x)) {
			add(name, x[name])
		}
	case map[string]int:
		for name, n := range x {
			out[name] = n
		}
	default:
		return nil, fmt.Errorf("%v: give a map like {default: 6, low: 1} or a string like default=6,low=1", raw)
	}
	if len(errs) > 0 {
		return nil, joinLine(errs)
	}
	return out, nil
}

// joinLine joins several problems with one key onto one line, so the
// key-named prefix of KeyError covers all of them.
func joinLine(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Validate reports every problem at once, each a *KeyError that names its key
// and says what to fix. Load calls it; call it yourself after changing a
// Config by hand.
func (c Config) Validate() error {
	var errs []error
	for _, ke := range c.problems() {
		errs = append(errs, ke)
	}
	return errors.Join(errs...)
}

func (c Config) problems() []*KeyError {
	var out []*KeyError
	bad := func(key, format string, args ...any) {
		out = append(out, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
	}
	between := func(key string, n, lo, hi int) {
		if n < lo || n > hi {
			bad(key, "must be between %d and %d, got %d", lo, hi, n)
		}
	}
	if c.Health.DisableAfter < 0 {
		bad("health.disable_after", "must not be negative (0 turns it off), got %s", c.Health.DisableAfter)
	}
	for key, d := range map[string]time.Duration{"retention.delivered": c.Retention.Delivered, "retention.exhausted": c.Retention.Exhausted} {
		if d < time.Hour {
			bad(key, "must be at least 1h, got %s", d)
		}
	}
	betweenD := func(key string, d, lo, hi time.Duration) {
		if d < lo || d > hi {
			bad(key, "must be between %s and %s, got %s", lo, hi, d)
		}
	}
	// At most 400 pauses a run: 1s keeps a run inside the retention
	// task's 10-minute timeout.
	betweenD("retention.pause", c.Retention.Pause, 0, time.Second)

	if !hasAnyPrefix(c.Redis.URL, "redis://", "rediss://") {
		bad("redis.url", "must start with redis:// or rediss://, got %q", redact(c.Redis.URL))
	}
	if !hasAnyPrefix(c.Database.URL, "sqlite://", "postgres://", "postgresql://") {
		bad("database.url", "must start with sqlite:// or postgres:// (or postgresql://), got %q", redact(c.Database.URL))
	}

	between("database.max_open_conns", c.Database.MaxOpenConns, 1, 10000)

	if len(c.Retry.Schedule) == 0 {
		bad("retry.schedule", "is empty: give at least one gap, e.g. 5m,30m,2h")
	}
	for i, d := range c.Retry.Schedule {
		if d <= 0 {
			bad("retry.schedule", "entry %d is %s: every gap must be positive %s", i+1, d, durationHint)
		}
	}
	between("retry.default_max_retries", c.Retry.DefaultMaxRetries, 0, 100)

	// asynq's scheduler ticks by a cron "@every", which rounds up to one
	// second and drops fractions of a second: refuse what it would not do.
	betweenD("sweeper.interval", c.Sweeper.Interval, time.Second, 24*time.Hour)
	if d := c.Sweeper.Interval; d >= time.Second && d%time.Second != 0 {
		bad("sweeper.interval", "must be a whole number of seconds (the scheduler ticks by the second), got %s", d)
	}
	between("sweeper.batch_size", c.Sweeper.BatchSize, 1, 100000)
	between("sweeper.max_pending", c.Sweeper.MaxPending, 0, 1000000)
	// Probes back off up to probe_interval (sweeper.ProbeGap): at 6 s or
	// more a dead endpoint gets at most 10 probes a minute once the
	// backoff has grown.
	if d := c.Health.ProbeInterval; d < 6*time.Second || d > 24*time.Hour {
		bad("health.probe_interval", "must be between 6s and 24h0m0s, got %s: it is the longest gap between probes of a failing webhook, which start 1s apart and double up to it, and under 6s a dead endpoint would get more than 10 probes a minute", d)
	}

	if m := c.Process.MemoryLimit; m != 0 && m < 64<<20 {
		bad("process.memory_limit", "must be 0 (no limit) or at least 64MiB, got %d bytes", m)
	}

	betweenD("delivery.timeout", c.Delivery.Timeout, 100*time.Millisecond, 5*time.Minute)
	betweenD("delivery.template_time_limit", c.Delivery.TemplateTimeLimit, 10*time.Millisecond, time.Hour)
	betweenD("delivery.condition_time_limit", c.Delivery.ConditionTimeLimit, 10*time.Millisecond, time.Hour)
	if c.Delivery.MaxPayloadBytes < 1024 {
		bad("delivery.max_payload_bytes", "must be at least 1024, got %d", c.Delivery.MaxPayloadBytes)
	}

	between("worker.concurrency", c.Worker.Concurrency, 1, 10000)
	if len(c.Worker.Queues) == 0 {
		bad("worker.queues", "is empty: give at least one queue %s", queuesHint)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Worker.Queues)) {
		if p := c.Worker.Queues[name]; strings.TrimSpace(name) == "" || p < 1 {
			bad("worker.queues", "%q: priority must be a positive integer %s", fmt.Sprintf("%s=%d", name, p), queuesHint)
		}
	}
	if c.Worker.ShutdownTimeout < 0 {
		bad("worker.shutdown_timeout", "must not be negative, got %s", c.Worker.ShutdownTimeout)
	}
	betweenD("worker.task_check_interval", c.Worker.TaskCheckInterval, time.Millisecond, 10*time.Second)
	if f := c.Worker.TenantShare; !(f > 0 && f <= 1) {
		bad("worker.tenant_share", "must be a fraction above 0 and at most 1 (0.25: a tenant may have a quarter of worker.concurrency at its receivers at once; 1 bounds no tenant), got %v", f)
	}

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "auto", "json", "text":
	default:
		bad("log.format", "%q is not auto, json or text", c.Log.Format)
	}

	betweenD("outbox.poll_interval", c.Outbox.PollInterval, 10*time.Millisecond, time.Hour)
	betweenD("outbox.recover_after", c.Outbox.RecoverAfter, time.Second, 24*time.Hour)
	if a := c.Monitor.Auth; a != "" {
		if err := checkMonitorAuth(a); err != nil {
			bad("monitor.auth", "%v", err)
		}
	}

	if a := c.Metrics.Addr; a != "" {
		if err := checkAddr(a); err != nil {
			bad("metrics.addr", "%v (use 127.0.0.1:9464, or an internal address such as 10.0.0.5:9464 behind a firewall; empty disables metrics)", err)
		}
	}
	if n := c.Metrics.MaxWebhookLabels; n < 0 {
		bad("metrics.max_webhook_labels", "%d is negative (0 counts every webhook as \"other\")", n)
	}
	if n := c.Metrics.MaxTenantLabels; n < 0 {
		bad("metrics.max_tenant_labels", "%d is negative (0 counts every tenant as \"other\")", n)
	}
	if n := c.Metrics.MaxWebhookLabelsPerTenant; n < 0 {
		bad("metrics.max_webhook_labels_per_tenant", "%d is negative (0 gives a tenant no cap of its own below metrics.max_webhook_labels)", n)
	}
	betweenD("metrics.scrape_cache", c.Metrics.ScrapeCache, 0, time.Minute)
	if err := checkAddr(c.API.Addr); err != nil {
		bad("api.addr", "%v (use 127.0.0.1:8088, or an internal address such as 10.0.0.5:8088 behind a TLS-terminating proxy)", err)
	}
	if c.API.MaxInflightBytes < 0 {
		bad("api.max_inflight_bytes", "must be 0 (half of the memory limit) or a size such as 512MiB, got %d bytes", c.API.MaxInflightBytes)
	}
	if f := c.API.TenantInflightShare; !(f > 0 && f <= 1) {
		bad("api.tenant_inflight_share", "must be a fraction above 0 and at most 1 (0.25: a tenant's requests in flight may hold a quarter of api.max_inflight_bytes), got %v", f)
	}
	if c.API.MaxBodyBytes < c.Delivery.MaxPayloadBytes {
		bad("api.max_body_bytes", "must be at least delivery.max_payload_bytes (%d), or documents that fit could never be published over HTTP; got %d", c.Delivery.MaxPayloadBytes, c.API.MaxBodyBytes)
	}
	if t := c.OpsEvents.CopyTo; t != "" && !tenantName.MatchString(t) {
		bad("ops_events.copy_to", "%q is not a tenant name (a-z, 0-9, '-' and '_', at most 63, starting with a letter or digit); name the tenant that receives every tenant's operational events, or leave it empty", t)
	}
	if u := c.OpsEvents.ConsoleURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || strings.HasSuffix(u, "/") || p.RawQuery != "" {
			bad("ops_events.console_url", "%q is not a base URL: give the console's scheme and host without a trailing slash, such as https://homing.example.com", u)
		}
	}
	return out
}

// checkAddr checks a listen address: host:port with a numeric port.
func checkAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		return fmt.Errorf("%q is not host:port", a)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number up to 65535", a, port)
	}
	return nil
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// redact hides a password in a URL-ish string before it goes into an error.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return s
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return s
}

// tenantName is a tenant's name, as package event's ValidTenant reads it.
var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
