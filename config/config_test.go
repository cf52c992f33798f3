package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeYAML puts body in a temporary homing.yaml and returns its path.
func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "homing.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load is LoadFrom with an optional YAML body ("" = no file).
func load(t *testing.T, yaml string, env ...string) (Config, error) {
	t.Helper()
	path := ""
	if yaml != "" {
		path = writeYAML(t, yaml)
	}
	return LoadFrom(path, env)
}

func TestDefault(t *testing.T) {
	t.Parallel()
	d := Default()
	want := Config{
		Redis:    Redis{URL: "redis://127.0.0.1:6379/0"},
		Database: Database{URL: "sqlite://" + DefaultSQLitePath(nil), AutoMigrate: true, MaxOpenConns: 6},
		Retry: Retry{
			Schedule:          []time.Duration{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour},
			DefaultMaxRetries: 3,
		},
		Sweeper: Sweeper{Interval: 5 * time.Second, BatchSize: 500},
		Delivery: Delivery{Timeout: 5 * time.Second, AllowPrivateNetworks: false, MaxPayloadBytes: 1048576,
			TemplateTimeLimit: time.Second, ConditionTimeLimit: 500 * time.Millisecond},
		Worker:    Worker{Concurrency: 50, Queues: map[string]int{"default": 1}, ShutdownTimeout: 30 * time.Second, TaskCheckInterval: 10 * time.Millisecond, TenantShare: 0.25},
		Log:       Log{Level: "info", Format: "auto"},
		Secrets:   Secrets{Key: ""},
		Metrics:   Metrics{Addr: "127.0.0.1:9464", MaxWebhookLabels: 100, MaxTenantLabels: 100, MaxWebhookLabelsPerTenant: 25, ScrapeCache: time.Second},
		Retention: Retention{Delivered: 720 * time.Hour, Exhausted: 2160 * time.Hour, Pause: 50 * time.Millisecond},
		Health:    Health{DisableAfter: 120 * time.Hour, ProbeInterval: 10 * time.Second},
		Outbox:    Outbox{PollInterval: time.Second, RecoverAfter: 30 * time.Second},
		API:       API{Addr: "127.0.0.1:8088", MaxBodyBytes: 2097152, TenantInflightShare: 0.25},
		Process:   Process{MemoryLimit: 1 << 30},
		Tracing:   Tracing{PropagateToReceivers: true},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Default() =\n%+v\nwant\n%+v", d, want)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	loaded, err := LoadFrom("", nil)
	if err != nil {
		t.Fatalf("LoadFrom with nothing set: %v", err)
	}
	if !reflect.DeepEqual(loaded, want) {
		t.Errorf("LoadFrom(\"\", nil) =\n%+v\nwant the defaults", loaded)
	}
	// Each Default is a fresh value: changing one must not leak into the next.
	d.Worker.Queues["bulk"] = 3
	d.Retry.Schedule[0] = time.Second
	if again := Default(); !reflect.DeepEqual(again, want) {
		t.Errorf("Default() after mutating an earlier one = %+v", again)
	}
}

func TestLoadFrom(t *testing.T) {
	t.Parallel()
	fullFile := `
redis: {url: "rediss://cache.internal:6380/2"}
database:
  url: postgres://homing@db/homing
  auto_migrate: false
  max_open_conns: 16
retry:
  schedule: [1m, 10m, 1h30m]
  default_max_retries: 5
sweeper: {interval: 1m, batch_size: 100}
delivery: {timeout: 10s, allow_private_networks: false, max_payload_bytes: 4096}
worker:
  concurrency: 8
  queues: {default: 6, low: 1}
  shutdown_timeout: 1m
  task_check_interval: 20ms
log: {level: debug, format: text}
secrets: {key: abc}
metrics: {addr: "127.0.0.1:9000", max_webhook_labels: 20}
outbox: {poll_interval: 2s}
api: {addr: "127.0.0.1:9088", max_body_bytes: 8192}
process: {memory_limit: 2GiB}
`
	tests := []struct {
		name string
		yaml string
		env  []string
		want func(*Config) // applied to Default() to give the expected result
	}{
		{
			name: "file sets every key",
			yaml: fullFile,
			want: func(c *Config) {
				*c = Config{
					Redis:    Redis{URL: "rediss://cache.internal:6380/2"},
					Database: Database{URL: "postgres://homing@db/homing", AutoMigrate: false, MaxOpenConns: 16},
					Retry:    Retry{Schedule: []time.Duration{time.Minute, 10 * time.Minute, 90 * time.Minute}, DefaultMaxRetries: 5},
					Sweeper:  Sweeper{Interval: time.Minute, BatchSize: 100},
					Delivery: Delivery{Timeout: 10 * time.Second, AllowPrivateNetworks: false, MaxPayloadBytes: 4096,
						TemplateTimeLimit: time.Second, ConditionTimeLimit: 500 * time.Millisecond},
					Worker:    Worker{Concurrency: 8, Queues: map[string]int{"default": 6, "low": 1}, ShutdownTimeout: time.Minute, TaskCheckInterval: 20 * time.Millisecond, TenantShare: 0.25},
					Log:       Log{Level: "debug", Format: "text"},
					Secrets:   Secrets{Key: "abc"},
					Metrics:   Metrics{Addr: "127.0.0.1:9000", MaxWebhookLabels: 20, MaxTenantLabels: 100, MaxWebhookLabelsPerTenant: 25, ScrapeCache: time.Second},
					Retention: Retention{Delivered: 720 * time.Hour, Exhausted: 2160 * time.Hour, Pause: 50 * time.Millisecond},
					Health:    Health{DisableAfter: 120 * time.Hour, ProbeInterval: 10 * time.Second},
					Outbox:    Outbox{PollInterval: 2 * time.Second, RecoverAfter: 30 * time.Second},
					API:       API{Addr: "127.0.0.1:9088", MaxBodyBytes: 8192, TenantInflightShare: 0.25},
					Process:   Process{MemoryLimit: 2 << 30},
					Tracing:   Tracing{PropagateToReceivers: true},
				}
			},
		},
		{
			name: "environment overrides the file, key by key",
			yaml: fullFile,
			env: []string{
				"HOMING_REDIS_URL=redis://other:6379/1",
				"HOMING_RETRY_SCHEDULE=1s,2s",
				"HOMING_WORKER_QUEUES=critical=6,default=3",
				"HOMING_SWEEPER_BATCH_SIZE=7",
				"HOMING_DATABASE_AUTO_MIGRATE=true",
				"HOMING_DELIVERY_TIMEOUT=250ms",
			},
			want: func(c *Config) {
				c.Redis.URL = "redis://other:6379/1"
				c.Database = Database{URL: "postgres://homing@db/homing", AutoMigrate: true, MaxOpenConns: 16}
				c.Retry = Retry{Schedule: []time.Duration{time.Second, 2 * time.Second}, DefaultMaxRetries: 5}
				c.Sweeper = Sweeper{Interval: time.Minute, BatchSize: 7}
				c.Delivery = Delivery{Timeout: 250 * time.Millisecond, AllowPrivateNetworks: false, MaxPayloadBytes: 4096,
					TemplateTimeLimit: time.Second, ConditionTimeLimit: 500 * time.Millisecond}
				c.Worker = Worker{Concurrency: 8, Queues: map[string]int{"critical": 6, "default": 3}, ShutdownTimeout: time.Minute, TaskCheckInterval: 20 * time.Millisecond, TenantShare: 0.25}
				c.Log = Log{Level: "debug", Format: "text"}
				c.Secrets.Key = "abc"
				c.Metrics = Metrics{Addr: "127.0.0.1:9000", MaxWebhookLabels: 20, MaxTenantLabels: 100, MaxWebhookLabelsPerTenant: 25, ScrapeCache: time.Second}
				c.Outbox.PollInterval = 2 * time.Second
				c.API = API{Addr: "127.0.0.1:9088", MaxBodyBytes: 8192, TenantInflightShare: 0.25}
				c.Process.MemoryLimit = 2 << 30
			},
		},
		{
			name: "environment alone, no file",
			env:  []string{"HOMING_LOG_LEVEL=warn", "HOMING_WORKER_CONCURRENCY=2", "HOMING_SECRETS_KEY=k"},
			want: func(c *Config) { c.Log.Level = "warn"; c.Worker.Concurrency = 2; c.Secrets.Key = "k" },
		},
		{
			name: "schedule as a YAML list",
			yaml: "retry:\n  schedule:\n    - 30s\n    - 1h\n",
			want: func(c *Config) { c.Retry.Schedule = []time.Duration{30 * time.Second, time.Hour} },
		},
		{
			name: "schedule as a comma-separated YAML string with spaces",
			yaml: "retry: {schedule: \"30s, 1h\"}\n",
			want: func(c *Config) { c.Retry.Schedule = []time.Duration{30 * time.Second, time.Hour} },
		},
		{
			name: "schedule of one YAML value",
			yaml: "retry: {schedule: 15m}\n",
			want: func(c *Config) { c.Retry.Schedule = []time.Duration{15 * time.Minute} },
		},
		{
			name: "schedule from the environment replaces a file list",
			yaml: "retry: {schedule: [1m, 2m, 3m]}\n",
			env:  []string{"HOMING_RETRY_SCHEDULE=10s"},
			want: func(c *Config) { c.Retry.Schedule = []time.Duration{10 * time.Second} },
		},
		{
			name: "queues as a YAML map",
			yaml: "worker: {queues: {default: 6, low: 1}}\n",
			want: func(c *Config) { c.Worker.Queues = map[string]int{"default": 6, "low": 1} },
		},
		{
			name: "queues as a YAML string",
			yaml: "worker: {queues: \"default=6, low=1\"}\n",
			want: func(c *Config) { c.Worker.Queues = map[string]int{"default": 6, "low": 1} },
		},
		{
			name: "queues from the environment replace a file map",
			yaml: "worker: {queues: {default: 6, low: 1}}\n",
			env:  []string{"HOMING_WORKER_QUEUES=webhooks=2"},
			want: func(c *Config) { c.Worker.Queues = map[string]int{"webhooks": 2} },
		},
		{
			name: "an empty section and a null value keep the defaults",
			yaml: "sweeper:\nredis: {url: ~}\n",
			want: func(c *Config) {},
		},
		{
			name: "keys in the file are case-insensitive",
			yaml: "Log: {Level: error}\n",
			want: func(c *Config) { c.Log.Level = "error" },
		},
		{
			name: "an empty variable counts as set",
			env:  []string{"HOMING_METRICS_ADDR="},
			want: func(c *Config) { c.Metrics.Addr = "" },
		},
		{
			name: "the last of repeated variables wins",
			env:  []string{"HOMING_LOG_FORMAT=json", "HOMING_LOG_FORMAT=text"},
			want: func(c *Config) { c.Log.Format = "text" },
		},
		{
			name: "other variables, including other HOMING_ ones, are ignored",
			env:  []string{"PATH=/bin", "HOMING_TEST_DATABASE_URL=postgres://x", "HOMING_NOT_A_KEY=1", "MALFORMED"},
			want: func(c *Config) {},
		},
		{
			name: "integers and booleans as strings in the file",
			yaml: "sweeper: {batch_size: \"42\"}\ndelivery: {allow_private_networks: \"false\"}\n",
			want: func(c *Config) { c.Sweeper.BatchSize = 42; c.Delivery.AllowPrivateNetworks = false },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := load(t, tt.yaml, tt.env...)
			if err != nil {
				t.Fatalf("LoadFrom: %v", err)
			}
			want := Default()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestEveryKeyHasItsVariable sets each key through its HOMING_ variable and
// checks it lands, so Keys, EnvName and the parsers cannot drift apart.
func TestEveryKeyHasItsVariable(t *testing.T) {
	t.Parallel()
	values := map[string]struct {
		val  string
		want func(*Config)
	}{
		"redis.url":                       {"redis://r:1/3", func(c *Config) { c.Redis.URL = "redis://r:1/3" }},
		"redis.sentinel.master":           {"mymaster", func(c *Config) { c.Redis.Sentinel.Master = "mymaster" }},
		"redis.sentinel.addrs":            {"s1:26379, s2:26379", func(c *Config) { c.Redis.Sentinel.Addrs = []string{"s1:26379", "s2:26379"} }},
		"redis.cluster.addrs":             {"n1:6379", func(c *Config) { c.Redis.Cluster.Addrs = []string{"n1:6379"} }},
		"database.url":                    {"postgresql://d/x", func(c *Config) { c.Database.URL = "postgresql://d/x" }},
		"database.auto_migrate":           {"false", func(c *Config) { c.Database.AutoMigrate = false }},
		"database.max_open_conns":         {"8", func(c *Config) { c.Database.MaxOpenConns = 8 }},
		"retry.schedule":                  {"1s,2s", func(c *Config) { c.Retry.Schedule = []time.Duration{time.Second, 2 * time.Second} }},
		"retry.default_max_retries":       {"0", func(c *Config) { c.Retry.DefaultMaxRetries = 0 }},
		"sweeper.interval":                {"1m30s", func(c *Config) { c.Sweeper.Interval = 90 * time.Second }},
		"sweeper.batch_size":              {"1", func(c *Config) { c.Sweeper.BatchSize = 1 }},
		"sweeper.max_pending":             {"2000", func(c *Config) { c.Sweeper.MaxPending = 2000 }},
		"delivery.timeout":                {"100ms", func(c *Config) { c.Delivery.Timeout = 100 * time.Millisecond }},
		"delivery.allow_private_networks": {"1", func(c *Config) { c.Delivery.AllowPrivateNetworks = true }},
		"delivery.allowed_networks": {"10.1.0.0/16, fd00::/8", func(c *Config) {
			c.Delivery.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/8")}
		}},
		"delivery.max_payload_bytes":            {"1024", func(c *Config) { c.Delivery.MaxPayloadBytes = 1024 }},
		"delivery.template_time_limit":          {"1h", func(c *Config) { c.Delivery.TemplateTimeLimit = time.Hour }},
		"delivery.condition_time_limit":         {"10ms", func(c *Config) { c.Delivery.ConditionTimeLimit = 10 * time.Millisecond }},
		"worker.concurrency":                    {"10000", func(c *Config) { c.Worker.Concurrency = 10000 }},
		"worker.queues":                         {"a=1", func(c *Config) { c.Worker.Queues = map[string]int{"a": 1} }},
		"worker.shutdown_timeout":               {"0s", func(c *Config) { c.Worker.ShutdownTimeout = 0 }},
		"worker.task_check_interval":            {"5ms", func(c *Config) { c.Worker.TaskCheckInterval = 5 * time.Millisecond }},
		"worker.tenant_share":                   {"0.5", func(c *Config) { c.Worker.TenantShare = 0.5 }},
		"log.level":                             {"debug", func(c *Config) { c.Log.Level = "debug" }},
		"log.format":                            {"text", func(c *Config) { c.Log.Format = "text" }},
		"secrets.key":                           {"c2VjcmV0", func(c *Config) { c.Secrets.Key = "c2VjcmV0" }},
		"retention.delivered":                   {"24h", func(c *Config) { c.Retention.Delivered = 24 * time.Hour }},
		"retention.exhausted":                   {"48h", func(c *Config) { c.Retention.Exhausted = 48 * time.Hour }},
		"retention.pause":                       {"0s", func(c *Config) { c.Retention.Pause = 0 }},
		"health.disable_after":                  {"0s", func(c *Config) { c.Health.DisableAfter = 0 }},
		"health.probe_interval":                 {"1m", func(c *Config) { c.Health.ProbeInterval = time.Minute }},
		"metrics.addr":                          {":1", func(c *Config) { c.Metrics.Addr = ":1" }},
		"metrics.max_webhook_labels":            {"7", func(c *Config) { c.Metrics.MaxWebhookLabels = 7 }},
		"metrics.max_tenant_labels":             {"8", func(c *Config) { c.Metrics.MaxTenantLabels = 8 }},
		"metrics.max_webhook_labels_per_tenant": {"9", func(c *Config) { c.Metrics.MaxWebhookLabelsPerTenant = 9 }},
		"metrics.scrape_cache":                  {"0s", func(c *Config) { c.Metrics.ScrapeCache = 0 }},
		"outbox.poll_interval":                  {"250ms", func(c *Config) { c.Outbox.PollInterval = 250 * time.Millisecond }},
		"api.addr":                              {"127.0.0.1:0", func(c *Config) { c.API.Addr = "127.0.0.1:0" }},
		"api.max_body_bytes":                    {"1048576", func(c *Config) { c.API.MaxBodyBytes = 1048576 }},
		"api.asynqmon_url":                      {"http://127.0.0.1:8080", func(c *Config) { c.API.AsynqmonURL = "http://127.0.0.1:8080" }},
		"api.max_inflight_bytes":                {"256MiB", func(c *Config) { c.API.MaxInflightBytes = 256 << 20 }},
		"api.tenant_inflight_share":             {"0.5", func(c *Config) { c.API.TenantInflightShare = 0.5 }},
		"outbox.recover_after":                  {"45s", func(c *Config) { c.Outbox.RecoverAfter = 45 * time.Second }},
		"monitor.auth":                          {"bearer:0123456789abcdef", func(c *Config) { c.Monitor.Auth = "bearer:0123456789abcdef" }},
		"process.memory_limit":                  {"512MiB", func(c *Config) { c.Process.MemoryLimit = 512 << 20 }},
		"ops_events.copy_to":                    {"ops", func(c *Config) { c.OpsEvents.CopyTo = "ops" }},
		"ops_events.console_url":                {"https://homing.example.com", func(c *Config) { c.OpsEvents.ConsoleURL = "https://homing.example.com" }},
		"tracing.propagate_to_receivers":        {"false", func(c *Config) { c.Tracing.PropagateToReceivers = false }},
	}
	keys := Config{}.Keys()
	if len(keys) != len(values) {
		t.Errorf("Keys() has %d keys, this test covers %d: %v", len(keys), len(values), keys)
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			tc, ok := values[key]
			if !ok {
				t.Fatalf("key %s is not covered by this test", key)
			}
			got, err := LoadFrom("", []string{EnvName(key) + "=" + tc.val})
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tc.want(&want)
			if reflect.DeepEqual(want, Default()) {
				t.Fatalf("test value %q for %s is the default: it proves nothing", tc.val, key)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s=%s gave\n%+v\nwant\n%+v", EnvName(key), tc.val, got, want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"redis.url":                 "HOMING_REDIS_URL",
		"retry.schedule":            "HOMING_RETRY_SCHEDULE",
		"worker.queues":             "HOMING_WORKER_QUEUES",
		"sweeper.batch_size":        "HOMING_SWEEPER_BATCH_SIZE",
		"retry.default_max_retries": "HOMING_RETRY_DEFAULT_MAX_RETRIES",
	}
	for key, want := range tests {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		env  []string
		key  string // the KeyError.Key expected
		want string // a substring of the message
	}{
		{"schedule entry not a duration", "", []string{"HOMING_RETRY_SCHEDULE=5m,5x"}, "retry.schedule",
			`retry.schedule (from HOMING_RETRY_SCHEDULE): "5x" is not a duration (use values like 5m, 2h)`},
		{"schedule entry not a duration in the file", "retry: {schedule: [5m, 5x]}\n", nil, "retry.schedule",
			`retry.schedule: "5x" is not a duration (use values like 5m, 2h)`},
		{"schedule entry without unit", "retry: {schedule: [5]}\n", nil, "retry.schedule", `"5" is not a duration`},
		{"schedule empty", "", []string{"HOMING_RETRY_SCHEDULE="}, "retry.schedule", "retry.schedule: is empty"},
		{"schedule gap not positive", "", []string{"HOMING_RETRY_SCHEDULE=5m,0s"}, "retry.schedule", "entry 2 is 0s: every gap must be positive"},
		{"schedule negative gap", "", []string{"HOMING_RETRY_SCHEDULE=-1m"}, "retry.schedule", "entry 1 is -1m0s"},
		{"schedule of the wrong shape", "retry: {schedule: {a: 1}}\n", nil, "", `unknown key "retry.schedule.a"`},
		{"max retries negative", "", []string{"HOMING_RETRY_DEFAULT_MAX_RETRIES=-1"}, "retry.default_max_retries",
			"retry.default_max_retries: must be between 0 and 100, got -1"},
		{"max retries too high", "retry: {default_max_retries: 101}\n", nil, "retry.default_max_retries", "got 101"},
		{"batch size zero", "", []string{"HOMING_SWEEPER_BATCH_SIZE=0"}, "sweeper.batch_size",
			"sweeper.batch_size: must be between 1 and 100000, got 0"},
		{"batch size not a number", "", []string{"HOMING_SWEEPER_BATCH_SIZE=lots"}, "sweeper.batch_size", `"lots" is not a whole number`},
		{"batch size fractional", "sweeper: {batch_size: 1.5}\n", nil, "sweeper.batch_size", "1.5 is not a whole number"},
		{"interval not a duration", "sweeper: {interval: often}\n", nil, "sweeper.interval", `sweeper.interval: "often" is not a duration`},
		{"interval too short", "", []string{"HOMING_SWEEPER_INTERVAL=500ms"}, "sweeper.interval", "must be between 1s and 24h0m0s, got 500ms"},
		{"probe interval too short", "", []string{"HOMING_HEALTH_PROBE_INTERVAL=5s"}, "health.probe_interval", "must be between 6s and 24h0m0s, got 5s"},
		{"retention pause too long", "", []string{"HOMING_RETENTION_PAUSE=5s"}, "retention.pause", "retention.pause: must be between 0s and 1s, got 5s"},
		{"template time limit too long", "", []string{"HOMING_DELIVERY_TEMPLATE_TIME_LIMIT=2h"}, "delivery.template_time_limit", "must be between 10ms and 1h0m0s, got 2h0m0s"},
		{"condition time limit zero", "", []string{"HOMING_DELIVERY_CONDITION_TIME_LIMIT=0s"}, "delivery.condition_time_limit", "must be between 10ms and 1h0m0s, got 0s"},
		{"interval not whole seconds", "", []string{"HOMING_SWEEPER_INTERVAL=1500ms"}, "sweeper.interval", "must be a whole number of seconds (the scheduler ticks by the second), got 1.5s"},
		{"redis url scheme", "", []string{"HOMING_REDIS_URL=localhost:6379"}, "redis.url",
			`redis.url: must start with redis:// or rediss://, got "localhost:6379"`},
		{"database url scheme", "database: {url: mysql://x}\n", nil, "database.url",
			"database.url: must start with sqlite:// or postgres:// (or postgresql://)"},
		{"auto_migrate not a boolean", "", []string{"HOMING_DATABASE_AUTO_MIGRATE=maybe"}, "database.auto_migrate", `"maybe" is not true or false`},
		{"allow_private_networks not a boolean", "delivery: {allow_private_networks: 2}\n", nil, "delivery.allow_private_networks", "2 is not true or false"},
		{"timeout too long", "", []string{"HOMING_DELIVERY_TIMEOUT=1h"}, "delivery.timeout", "delivery.timeout: must be between 100ms and 5m0s, got 1h0m0s"},
		{"timeout too short", "delivery: {timeout: 10ms}\n", nil, "delivery.timeout", "got 10ms"},
		{"payload too small", "", []string{"HOMING_DELIVERY_MAX_PAYLOAD_BYTES=1023"}, "delivery.max_payload_bytes", "must be at least 1024, got 1023"},
		{"concurrency zero", "", []string{"HOMING_WORKER_CONCURRENCY=0"}, "worker.concurrency", "worker.concurrency: must be between 1 and 10000, got 0"},
		{"concurrency too high", "worker: {concurrency: 10001}\n", nil, "worker.concurrency", "got 10001"},
		{"queue priority not a number", "", []string{"HOMING_WORKER_QUEUES=default=1,bulk=x"}, "worker.queues",
			`worker.queues (from HOMING_WORKER_QUEUES): "bulk=x": priority must be a positive integer`},
		{"queue priority not a number in a map", "worker: {queues: {bulk: x}}\n", nil, "worker.queues",
			`worker.queues: "bulk=x": priority must be a positive integer`},
		{"queue priority zero", "worker: {queues: {bulk: 0}}\n", nil, "worker.queues", `worker.queues: "bulk=0": priority must be a positive integer`},
		{"queue priority negative", "", []string{"HOMING_WORKER_QUEUES=bulk=-2"}, "worker.queues", `"bulk=-2": priority must be a positive integer`},
		{"queue without priority", "", []string{"HOMING_WORKER_QUEUES=bulk"}, "worker.queues", `"bulk": no priority (use name=priority`},
		{"queue without name", "", []string{"HOMING_WORKER_QUEUES==3"}, "worker.queues", `"=3": the queue name is empty`},
		{"queue twice", "", []string{"HOMING_WORKER_QUEUES=a=1,a=2"}, "worker.queues", `queue "a" is given twice`},
		{"queues empty", "", []string{"HOMING_WORKER_QUEUES="}, "worker.queues", "worker.queues: is empty"},
		{"shutdown timeout negative", "", []string{"HOMING_WORKER_SHUTDOWN_TIMEOUT=-1s"}, "worker.shutdown_timeout", "must not be negative, got -1s"},
		{"log level", "", []string{"HOMING_LOG_LEVEL=loud"}, "log.level", `log.level: "loud" is not one of debug, info, warn, error`},
		{"log format", "log: {format: xml}\n", nil, "log.format", `log.format: "xml" is not auto, json or text`},
		{"metrics addr without port", "", []string{"HOMING_METRICS_ADDR=9464"}, "metrics.addr", `metrics.addr: "9464" is not host:port`},
		{"metrics addr bad port", "metrics: {addr: \":http2\"}\n", nil, "metrics.addr", `port "http2" is not a number`},
		{"negative webhook labels", "", []string{"HOMING_METRICS_MAX_WEBHOOK_LABELS=-1"}, "metrics.max_webhook_labels", "-1 is negative"},
		{"api addr empty", "", []string{"HOMING_API_ADDR="}, "api.addr", `api.addr: "" is not host:port (use 127.0.0.1:8088`},
		{"api addr without port", "api: {addr: localhost}\n", nil, "api.addr", `"localhost" is not host:port`},
		{"tenant share zero", "", []string{"HOMING_API_TENANT_INFLIGHT_SHARE=0"}, "api.tenant_inflight_share",
			"api.tenant_inflight_share: must be a fraction above 0 and at most 1 (0.25: a tenant's requests in flight may hold a quarter of api.max_inflight_bytes), got 0"},
		{"tenant share over one", "api: {tenant_inflight_share: 1.5}\n", nil, "api.tenant_inflight_share", "must be a fraction above 0 and at most 1"},
		{"ops copy to no tenant", "", []string{"HOMING_OPS_EVENTS_COPY_TO=Ops Team"}, "ops_events.copy_to", `"Ops Team" is not a tenant name`},
		{"ops console url relative", "ops_events: {console_url: /console}\n", nil, "ops_events.console_url", `"/console" is not a base URL`},
		{"ops console url trailing slash", "", []string{"HOMING_OPS_EVENTS_CONSOLE_URL=https://h.example.com/"}, "ops_events.console_url", "without a trailing slash"},
		{"tracing propagation not a bool", "", []string{"HOMING_TRACING_PROPAGATE_TO_RECEIVERS=maybe"}, "tracing.propagate_to_receivers",
			`tracing.propagate_to_receivers (from HOMING_TRACING_PROPAGATE_TO_RECEIVERS): "maybe" is not true or false`},
		{"worker tenant share zero", "", []string{"HOMING_WORKER_TENANT_SHARE=0"}, "worker.tenant_share",
			"worker.tenant_share: must be a fraction above 0 and at most 1 (0.25: a tenant may have a quarter of worker.concurrency at its receivers at once; 1 bounds no tenant), got 0"},
		{"worker tenant share over one", "worker: {tenant_share: 2}\n", nil, "worker.tenant_share", "must be a fraction above 0 and at most 1"},
		{"tenant share not a number", "", []string{"HOMING_API_TENANT_INFLIGHT_SHARE=a quarter"}, "api.tenant_inflight_share", `"a quarter" is not a number`},
		{"api body smaller than a payload", "", []string{"HOMING_API_MAX_BODY_BYTES=4096", "HOMING_DELIVERY_MAX_PAYLOAD_BYTES=8192"}, "api.max_body_bytes",
			"api.max_body_bytes: must be at least delivery.max_payload_bytes (8192)"},
		{"string key given a list", "redis: {url: [a, b]}\n", nil, "redis.url", "redis.url: must be a single value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.yaml, tt.env...)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, tt.want)
			}
			if tt.key == "" {
				return
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.key {
				t.Errorf("error %v: want a *KeyError for %s, got %#v", err, tt.key, ke)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	_, err := LoadFrom("", []string{
		"HOMING_REDIS_URL=localhost",
		"HOMING_RETRY_SCHEDULE=5x,7y",
		"HOMING_SWEEPER_BATCH_SIZE=0",
		"HOMING_WORKER_QUEUES=bulk=x",
		"HOMING_LOG_LEVEL=loud",
	})
	if err == nil {
		t.Fatal("no error")
	}
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ke *KeyError
		if !errors.As(e, &ke) {
			t.Fatalf("%v is not a *KeyError", e)
		}
		keys = append(keys, ke.Key)
	}
	slices.Sort(keys)
	want := []string{"log.level", "redis.url", "retry.schedule", "sweeper.batch_size", "worker.queues"}
	if !slices.Equal(keys, want) {
		t.Errorf("problems with %v, want exactly one for each of %v; error:\n%v", keys, want, err)
	}
	msg := err.Error()
	for _, s := range []string{`"5x" is not a duration`, `"7y" is not a duration`} {
		if !strings.Contains(msg, s) {
			t.Errorf("error does not report %s:\n%s", s, msg)
		}
	}
	// The schedule did not parse; a second complaint that it is empty would be noise.
	if strings.Contains(msg, "is empty") {
		t.Errorf("error repeats a parse failure as a validation failure:\n%s", msg)
	}
}

func TestValidateHandBuilt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"zero value", func(c *Config) { *c = Config{} }, "redis.url: must start with"},
		{"queue priority zero", func(c *Config) { c.Worker.Queues = map[string]int{"default": 0} }, `worker.queues: "default=0": priority must be a positive integer`},
		{"queue name empty", func(c *Config) { c.Worker.Queues = map[string]int{"": 1} }, `worker.queues: "=1"`},
		{"schedule gap zero", func(c *Config) { c.Retry.Schedule = []time.Duration{time.Minute, 0} }, "retry.schedule: entry 2 is 0s"},
		{"schedule nil", func(c *Config) { c.Retry.Schedule = nil }, "retry.schedule: is empty"},
		{"password not echoed", func(c *Config) { c.Database.URL = "mysql://u:hunter2@db/x" }, `"mysql://u:xxxxx@db/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want it to contain %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("Validate() echoes a password: %v", err)
			}
		})
	}
	zero := Config{}.Validate()
	for _, key := range []string{"redis.url", "database.url", "retry.schedule", "sweeper.interval", "sweeper.batch_size",
		"delivery.timeout", "delivery.max_payload_bytes", "worker.concurrency", "worker.queues", "log.level", "log.format"} {
		if !strings.Contains(zero.Error(), key+": ") {
			t.Errorf("Validate of the zero Config does not report %s:\n%v", key, zero)
		}
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	t.Run("unknown key names the key", func(t *testing.T) {
		t.Parallel()
		path := writeYAML(t, "sweeper:\n  intervall: 1m\n")
		_, err := LoadFrom(path, nil)
		if err == nil || !strings.Contains(err.Error(), `unknown key "sweeper.intervall"`) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v, want it to name sweeper.intervall and %s", err, path)
		}
		if err != nil && !strings.Contains(err.Error(), "sweeper.interval,") {
			t.Errorf("error %v does not list the supported keys", err)
		}
	})
	t.Run("unknown section", func(t *testing.T) {
		t.Parallel()
		_, err := load(t, "reddis: {url: redis://x}\nlog: {level: debug}\n")
		if err == nil || !strings.Contains(err.Error(), `unknown key "reddis.url"`) {
			t.Errorf("error %v, want it to name reddis.url", err)
		}
	})
	t.Run("every unknown key at once", func(t *testing.T) {
		t.Parallel()
		_, err := load(t, "a: 1\nb: 2\n")
		if err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
			t.Errorf("error %v, want both a and b", err)
		}
	})
	t.Run("section given a value", func(t *testing.T) {
		t.Parallel()
		_, err := load(t, "redis: redis://x\n")
		if err == nil || !strings.Contains(err.Error(), `"redis" is a section, not a value: set its keys instead (redis.url, redis.sentinel.master, redis.sentinel.addrs, redis.cluster.addrs)`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("missing file names it", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "nope.yaml")
		_, err := LoadFrom(path, nil)
		if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %v, want fs.ErrNotExist naming %s", err, path)
		}
	})
	t.Run("malformed YAML names the file", func(t *testing.T) {
		t.Parallel()
		path := writeYAML(t, "redis: [unclosed\n")
		_, err := LoadFrom(path, nil)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v, want it to name %s", err, path)
		}
	})
}

// TestDefaultSQLitePath: the default database is per user and absolute, never
// relative to the directory a command runs in.
func TestDefaultSQLitePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"XDG_DATA_HOME=/data/me", "HOME=/home/me"}, "/data/me/homing/homing.db"},
		{[]string{"HOME=/home/me"}, "/home/me/.local/share/homing/homing.db"},
		{[]string{"XDG_DATA_HOME=relative/dir", "HOME=/home/me"}, "/home/me/.local/share/homing/homing.db"},
		{[]string{"XDG_DATA_HOME=", "HOME=/home/me"}, "/home/me/.local/share/homing/homing.db"},
	} {
		if got := DefaultSQLitePath(tc.env); got != tc.want {
			t.Errorf("DefaultSQLitePath(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
	if p := DefaultSQLitePath(nil); !filepath.IsAbs(p) {
		t.Errorf("DefaultSQLitePath without HOME = %q, want the process's home, absolute", p)
	}
	c, err := load(t, "", "XDG_DATA_HOME=/data/me", "HOMING_LOG_LEVEL=warn")
	if err != nil || c.Database.URL != "sqlite:///data/me/homing/homing.db" {
		t.Errorf("LoadFrom without database.url: %q, %v; want sqlite:///data/me/homing/homing.db", c.Database.URL, err)
	}
	c, err = load(t, "database:\n  url: sqlite://here.db\n", "XDG_DATA_HOME=/data/me")
	if err != nil || c.Database.URL != "sqlite://here.db" {
		t.Errorf("LoadFrom with database.url: %q, %v; want it as given", c.Database.URL, err)
	}
}

// process.memory_limit reads sizes as GOMEMLIMIT writes them, and refuses
// what would leave a process no room to start.
func TestMemoryLimitSizes(t *testing.T) {
	t.Parallel()
	for val, want := range map[string]int64{"1GiB": 1 << 30, "96MiB": 96 << 20, "200000000": 200000000, "0": 0, "131072KiB": 128 << 20} {
		c, err := LoadFrom("", []string{"HOMING_PROCESS_MEMORY_LIMIT=" + val})
		if err != nil || c.Process.MemoryLimit != want {
			t.Errorf("%s: %d, %v; want %d", val, c.Process.MemoryLimit, err, want)
		}
	}
	for _, val := range []string{"1GB", "-1MiB", "lots", "1MiB"} {
		if _, err := LoadFrom("", []string{"HOMING_PROCESS_MEMORY_LIMIT=" + val}); err == nil || !strings.Contains(err.Error(), "process.memory_limit") {
			t.Errorf("%s: %v, want refused naming process.memory_limit", val, err)
		}
	}
}

// A worker's bound on one tenant's requests is its share of the
// concurrency rounded up, at least one, and none at a share of 1.
func TestTenantRequests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		concurrency int
		share       float64
		want        int
	}{
		{50, 0.25, 13},
		{8, 0.25, 2},
		{1, 0.25, 1},
		{3, 0.01, 1},
		{10, 0.5, 5},
		{10, 1, 0},
	} {
		if got := (Worker{Concurrency: c.concurrency, TenantShare: c.share}).TenantRequests(); got != c.want {
			t.Errorf("TenantRequests of concurrency %d, share %v = %d, want %d", c.concurrency, c.share, got, c.want)
		}
	}
}
