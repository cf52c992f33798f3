// Package config reads Homing's configuration once: a YAML file, overridden
// by HOMING_* environment variables, over defaults; then validates it with
// errors that name the key. There is no global config: main passes the
// parsed struct (or its parts) down.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Config is Homing's whole configuration.
type Config struct {
	Redis    Redis    `mapstructure:"redis"`
	Database Database `mapstructure:"database"`
	Retry    Retry    `mapstructure:"retry"`
	Sweeper  Sweeper  `mapstructure:"sweeper"`
	Delivery Delivery `mapstructure:"delivery"`
	Worker   Worker   `mapstructure:"worker"`
	Log      Log      `mapstructure:"log"`
	Secrets  Secrets  `mapstructure:"secrets"`
	Metrics  Metrics  `mapstructure:"metrics"`
}

// Redis is where asynq keeps its queues.
type Redis struct {
	URL string `mapstructure:"url"`
}

// Database is where deliveries and webhooks live.
type Database struct {
	URL         string `mapstructure:"url"`
	AutoMigrate bool   `mapstructure:"auto_migrate"`
}

// Retry is the retry schedule and default budget.
type Retry struct {
	Schedule          []time.Duration `mapstructure:"schedule"`
	DefaultMaxRetries int             `mapstructure:"default_max_retries"`
}

// Sweeper paces the sweep that enqueues due retries.
type Sweeper struct {
	Interval  time.Duration `mapstructure:"interval"`
	BatchSize int           `mapstructure:"batch_size"`
}

// Delivery bounds outgoing requests.
type Delivery struct {
	Timeout              time.Duration `mapstructure:"timeout"`
	AllowPrivateNetworks bool          `mapstructure:"allow_private_networks"`
	MaxPayloadBytes      int           `mapstructure:"max_payload_bytes"`
}

// Worker sizes the asynq server.
type Worker struct {
	Concurrency     int            `mapstructure:"concurrency"`
	Queues          map[string]int `mapstructure:"queues"`
	ShutdownTimeout time.Duration  `mapstructure:"shutdown_timeout"`
}

// Log configures the process logger.
type Log struct {
	Level  string `mapstructure:"level"`
	Format string `mapstructure:"format"`
}

// Secrets holds the key webhook secrets are sealed with.
type Secrets struct {
	Key string `mapstructure:"key"`
}

// Metrics is where the worker serves Prometheus metrics.
type Metrics struct {
	Addr string `mapstructure:"addr"`
}

// defaults, by dotted key. Every supported key is here.
var defaults = map[string]any{
	"redis.url":                       "redis://127.0.0.1:6379/0",
	"database.url":                    "sqlite://homing.db",
	"database.auto_migrate":           true,
	"retry.schedule":                  "5m,30m,2h,5h,10h,10h",
	"retry.default_max_retries":       3,
	"sweeper.interval":                "5m",
	"sweeper.batch_size":              500,
	"delivery.timeout":                "5s",
	"delivery.allow_private_networks": true,
	"delivery.max_payload_bytes":      1 << 20,
	"worker.concurrency":              50,
	"worker.queues":                   "default=1",
	"worker.shutdown_timeout":         "30s",
	"log.level":                       "info",
	"log.format":                      "json",
	"secrets.key":                     "",
	"metrics.addr":                    ":9464",
}

// Keys lists every supported dotted key, sorted.
func Keys() []string {
	keys := make([]string, 0, len(defaults))
	for k := range defaults {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvName is the environment variable of a key: redis.url → HOMING_REDIS_URL.
func EnvName(key string) string {
	return "HOMING_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Default is the configuration with nothing set.
func Default() Config {
	c, err := LoadFrom("", nil)
	if err != nil {
		panic(err) // the defaults are constants: a failure is a programming error
	}
	return c
}

// Load reads the YAML file at path ("" = none) and the process environment.
func Load(path string) (Config, error) { return LoadFrom(path, os.Environ()) }

// LoadFrom is Load with an explicit environment ("K=V" entries).
func LoadFrom(path string, environ []string) (Config, error) {
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
		var unknown []string
		for _, k := range v.AllKeys() {
			if _, ok := defaults[k]; !ok && !isQueueKey(k, v) {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return Config{}, fmt.Errorf("config file %s: unknown key(s) %s (supported: %s)", path, strings.Join(unknown, ", "), strings.Join(Keys(), ", "))
		}
	}
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "HOMING_") {
			env[k] = val
		}
	}
	for _, k := range Keys() {
		if val, ok := env[EnvName(k)]; ok {
			v.Set(k, val)
		}
	}
	var c Config
	var problems []error
	c.Redis.URL = v.GetString("redis.url")
	c.Database.URL = v.GetString("database.url")
	c.Database.AutoMigrate = getBool(v, "database.auto_migrate", &problems)
	c.Retry.Schedule = getDurations(v, "retry.schedule", &problems)
	c.Retry.DefaultMaxRetries = getInt(v, "retry.default_max_retries", &problems)
	c.Sweeper.Interval = getDuration(v, "sweeper.interval", &problems)
	c.Sweeper.BatchSize = getInt(v, "sweeper.batch_size", &problems)
	c.Delivery.Timeout = getDuration(v, "delivery.timeout", &problems)
	c.Delivery.AllowPrivateNetworks = getBool(v, "delivery.allow_private_networks", &problems)
	c.Delivery.MaxPayloadBytes = getInt(v, "delivery.max_payload_bytes", &problems)
	c.Worker.Concurrency = getInt(v, "worker.concurrency", &problems)
	c.Worker.Queues = getQueues(v, "worker.queues", &problems)
	c.Worker.ShutdownTimeout = getDuration(v, "worker.shutdown_timeout", &problems)
	c.Log.Level = v.GetString("log.level")
	c.Log.Format = v.GetString("log.format")
	c.Secrets.Key = v.GetString("secrets.key")
	c.Metrics.Addr = v.GetString("metrics.addr")
	if len(problems) > 0 {
		return c, errors.Join(problems...)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// isQueueKey accepts worker.queues.<name> keys, which a YAML map produces.
func isQueueKey(k string, v *viper.Viper) bool {
	return strings.HasPrefix(k, "worker.queues.")
}

func getBool(v *viper.Viper, key string, problems *[]error) bool {
	switch x := v.Get(key).(type) {
	case bool:
		return x
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			*problems = append(*problems, fmt.Errorf("%s: %q is not true or false", key, x))
		}
		return b
	default:
		*problems = append(*problems, fmt.Errorf("%s: %v is not true or false", key, x))
		return false
	}
}

func getInt(v *viper.Viper, key string, problems *[]error) int {
	switch x := v.Get(key).(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		if x == float64(int(x)) {
			return int(x)
		}
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err == nil {
			return n
		}
	}
	*problems = append(*problems, fmt.Errorf("%s: %v is not a whole number", key, v.Get(key)))
	return 0
}

func parseDuration(key, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration (use values like 5m, 2h)", key, s)
	}
	return d, nil
}

func getDuration(v *viper.Viper, key string, problems *[]error) time.Duration {
	raw := v.Get(key)
	switch x := raw.(type) {
	case time.Duration:
		return x
	case string:
		d, err := parseDuration(key, x)
		if err != nil {
			*problems = append(*problems, err)
		}
		return d
	default:
		*problems = append(*problems, fmt.Errorf("%s: %v is not a duration (use values like 5m, 2h)", key, raw))
		return 0
	}
}

func getDurations(v *viper.Viper, key string, problems *[]error) []time.Duration {
	var items []string
	switch x := v.Get(key).(type) {
	case string:
		if strings.TrimSpace(x) != "" {
			items = strings.Split(x, ",")
		}
	case []any:
		for _, e := range x {
			items = append(items, fmt.Sprint(e))
		}
	case []string:
		items = x
	default:
		*problems = append(*problems, fmt.Errorf("%s: give a list of durations or one comma-separated string like 5m,30m,2h", key))
		return nil
	}
	out := make([]time.Duration, 0, len(items))
	for _, s := range items {
		d, err := parseDuration(key, s)
		if err != nil {
			*problems = append(*problems, err)
			continue
		}
		out = append(out, d)
	}
	return out
}

func getQueues(v *viper.Viper, key string, problems *[]error) map[string]int {
	out := map[string]int{}
	raw := v.Get(key)
	switch x := raw.(type) {
	case string:
		for _, part := range strings.Split(x, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, prio, ok := strings.Cut(part, "=")
			n, err := strconv.Atoi(strings.TrimSpace(prio))
			if !ok || strings.TrimSpace(name) == "" || err != nil || n < 1 {
				*problems = append(*problems, fmt.Errorf("%s: %q: use name=priority with a positive integer priority, e.g. default=6,low=1", key, part))
				continue
			}
			out[strings.TrimSpace(name)] = n
		}
	case map[string]any:
		for name, p := range x {
			var n int
			if err := mapstructure.WeakDecode(p, &n); err != nil || n < 1 {
				*problems = append(*problems, fmt.Errorf("%s: %q=%v: priority must be a positive integer", key, name, p))
				continue
			}
			out[name] = n
		}
	default:
		*problems = append(*problems, fmt.Errorf("%s: %v (%s): give a map like {default: 6, low: 1} or a string like default=6,low=1", key, raw, reflect.TypeOf(raw)))
	}
	return out
}

// Validate reports every problem at once; each names its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !strings.HasPrefix(c.Redis.URL, "redis://") && !strings.HasPrefix(c.Redis.URL, "rediss://") {
		bad("redis.url", "%q must start with redis:// or rediss://", c.Redis.URL)
	}
	u := c.Database.URL
	if !strings.HasPrefix(u, "sqlite://") && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		bad("database.url", "must start with sqlite:// or postgres:// (or postgresql://)")
	}
	if len(c.Retry.Schedule) == 0 {
		bad("retry.schedule", "is empty: give at least one gap, e.g. 5m,30m,2h")
	}
	for i, d := range c.Retry.Schedule {
		if d <= 0 {
			bad("retry.schedule", "entry %d (%s) must be positive", i+1, d)
		}
	}
	if c.Retry.DefaultMaxRetries < 0 || c.Retry.DefaultMaxRetries > 100 {
		bad("retry.default_max_retries", "must be between 0 and 100, got %d", c.Retry.DefaultMaxRetries)
	}
	if c.Sweeper.Interval < time.Second {
		bad("sweeper.interval", "must be at least 1s, got %s", c.Sweeper.Interval)
	}
	if c.Sweeper.BatchSize < 1 || c.Sweeper.BatchSize > 100000 {
		bad("sweeper.batch_size", "must be between 1 and 100000, got %d", c.Sweeper.BatchSize)
	}
	if c.Delivery.Timeout < 100*time.Millisecond || c.Delivery.Timeout > 5*time.Minute {
		bad("delivery.timeout", "must be between 100ms and 5m, got %s", c.Delivery.Timeout)
	}
	if c.Delivery.MaxPayloadBytes < 1024 {
		bad("delivery.max_payload_bytes", "must be at least 1024, got %d", c.Delivery.MaxPayloadBytes)
	}
	if c.Worker.Concurrency < 1 || c.Worker.Concurrency > 10000 {
		bad("worker.concurrency", "must be between 1 and 10000, got %d", c.Worker.Concurrency)
	}
	if len(c.Worker.Queues) == 0 {
		bad("worker.queues", "is empty: give at least one queue, e.g. default=1")
	}
	if c.Worker.ShutdownTimeout < 0 {
		bad("worker.shutdown_timeout", "must not be negative, got %s", c.Worker.ShutdownTimeout)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		bad("log.format", "%q is not json or text", c.Log.Format)
	}
	return errors.Join(errs...)
}
