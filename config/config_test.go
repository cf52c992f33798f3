package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "homing.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadFrom("", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	if !reflect.DeepEqual(c.Retry.Schedule, want) {
		t.Errorf("schedule %v", c.Retry.Schedule)
	}
	checks := map[string]bool{
		"redis.url":             c.Redis.URL == "redis://127.0.0.1:6379/0",
		"database.url":          c.Database.URL == "sqlite://homing.db",
		"database.auto_migrate": c.Database.AutoMigrate,
		"default_max_retries":   c.Retry.DefaultMaxRetries == 3,
		"sweeper.interval":      c.Sweeper.Interval == 5*time.Minute,
		"sweeper.batch_size":    c.Sweeper.BatchSize == 500,
		"delivery.timeout":      c.Delivery.Timeout == 5*time.Second,
		"allow_private":         c.Delivery.AllowPrivateNetworks,
		"worker.concurrency":    c.Worker.Concurrency == 50,
		"worker.queues":         reflect.DeepEqual(c.Worker.Queues, map[string]int{"default": 1}),
		"shutdown_timeout":      c.Worker.ShutdownTimeout == 30*time.Second,
		"log":                   c.Log.Level == "info" && c.Log.Format == "json",
		"metrics.addr":          c.Metrics.Addr == ":9464",
	}
	for k, ok := range checks {
		if !ok {
			t.Errorf("default of %s is wrong: %+v", k, c)
		}
	}
}

func TestFileThenEnvironment(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `
redis:
  url: redis://10.0.0.1:6379/2
retry:
  schedule: [1m, 2m]
  default_max_retries: 5
worker:
  queues: {default: 6, low: 1}
sweeper:
  interval: 1m
`)
	c, err := LoadFrom(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.URL != "redis://10.0.0.1:6379/2" || c.Retry.DefaultMaxRetries != 5 || c.Sweeper.Interval != time.Minute {
		t.Errorf("file not applied: %+v", c)
	}
	if !reflect.DeepEqual(c.Retry.Schedule, []time.Duration{time.Minute, 2 * time.Minute}) {
		t.Errorf("schedule list: %v", c.Retry.Schedule)
	}
	if !reflect.DeepEqual(c.Worker.Queues, map[string]int{"default": 6, "low": 1}) {
		t.Errorf("queues map: %v", c.Worker.Queues)
	}
	c, err = LoadFrom(p, []string{"HOMING_RETRY_SCHEDULE=1s,2s", "HOMING_SWEEPER_INTERVAL=1s", "HOMING_WORKER_QUEUES=a=2,b=1", "HOMING_DATABASE_AUTO_MIGRATE=false", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Retry.Schedule, []time.Duration{time.Second, 2 * time.Second}) || c.Sweeper.Interval != time.Second {
		t.Errorf("env did not override: %v %v", c.Retry.Schedule, c.Sweeper.Interval)
	}
	if !reflect.DeepEqual(c.Worker.Queues, map[string]int{"a": 2, "b": 1}) || c.Database.AutoMigrate {
		t.Errorf("env queues/auto_migrate: %v %v", c.Worker.Queues, c.Database.AutoMigrate)
	}
	if c.Retry.DefaultMaxRetries != 5 {
		t.Errorf("file value lost under env: %d", c.Retry.DefaultMaxRetries)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  string
		want string
	}{
		{"HOMING_RETRY_SCHEDULE=5x", `retry.schedule: "5x" is not a duration`},
		{"HOMING_RETRY_SCHEDULE=", "retry.schedule"},
		{"HOMING_SWEEPER_BATCH_SIZE=0", "sweeper.batch_size: must be between 1 and 100000, got 0"},
		{"HOMING_SWEEPER_BATCH_SIZE=lots", "sweeper.batch_size"},
		{"HOMING_REDIS_URL=localhost:6379", "redis.url"},
		{"HOMING_DATABASE_URL=mysql://x", "database.url"},
		{"HOMING_WORKER_QUEUES=bulk=x", `worker.queues: "bulk=x"`},
		{"HOMING_WORKER_CONCURRENCY=0", "worker.concurrency"},
		{"HOMING_DELIVERY_TIMEOUT=1h", "delivery.timeout"},
		{"HOMING_LOG_LEVEL=loud", "log.level"},
		{"HOMING_LOG_FORMAT=xml", "log.format"},
		{"HOMING_DATABASE_AUTO_MIGRATE=maybe", "database.auto_migrate"},
		{"HOMING_RETRY_DEFAULT_MAX_RETRIES=-1", "retry.default_max_retries"},
	}
	for _, tt := range tests {
		_, err := LoadFrom("", []string{tt.env})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.env, err, tt.want)
		}
	}
}

func TestUnknownKeyAndMissingFile(t *testing.T) {
	t.Parallel()
	_, err := LoadFrom(writeFile(t, "sweeper:\n  intervall: 1m\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "sweeper.intervall") {
		t.Errorf("typo not caught: %v", err)
	}
	_, err = LoadFrom(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	if got := EnvName("retry.default_max_retries"); got != "HOMING_RETRY_DEFAULT_MAX_RETRIES" {
		t.Fatal(got)
	}
	if len(Keys()) != len(defaults) {
		t.Fatal("keys")
	}
}
