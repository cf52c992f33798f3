// Package app builds Homing's shared dependencies from a parsed
// configuration: database, Redis connection, secret box, HTTP sender and
// dispatcher. Commands call Open once, then hand the parts to the services.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/opsevent"
	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/intake/redisconn"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/lib/tracing/otlp"
	"github.com/homingdev/homing/internal/ops/handoff"
)

// Version is Homing's version, sent in the User-Agent header.
var Version = "0.1.0"

// UserAgent is the User-Agent of every request Homing sends.
func UserAgent() string { return "Homing/" + Version }

// App is the set of dependencies a Homing process runs on.
type App struct {
	Config     config.Config
	Log        *slog.Logger
	Clock      clock.Clock
	DB         *gorm.DB
	Redis      asynq.RedisConnOpt
	Box        *secretbox.Box
	Sender     *send.Sender
	Dispatcher *dispatch.Dispatcher
	// Ops publishes Homing's operational events (ops_events.*).
	Ops *opsevent.Publisher
	// Database watches the database for outages (a failover): the API,
	// the relay and the worker's tasks report their errors to it, and
	// /readyz asks it. A process starts it (package process).
	Database *dbstate.Watcher
	// Limiter holds the rate budgets in Redis (webhooks' rate_limit,
	// tenants' publish_rate); nil when Redis is not a single client.
	Limiter *ratelimit.Limiter
	// Handoff carries delivery outcomes to the workers' metrics through
	// Redis. It is the dispatcher's observer until a worker with metrics
	// sets its own (worker.New), so that what a process without metrics
	// makes final (serve, the command line) is still counted; a worker
	// with metrics drains it at each scrape.
	Handoff *handoff.Handoff
	// rateRedis carries the rate limiter's calls.
	rateRedis redis.UniversalClient
	// traces is the process's OpenTelemetry provider; nil when tracing is
	// off (no OTLP endpoint configured, or a one-shot command).
	traces *otlp.Provider
}

// Options adjusts Open for tests and embedded use.
type Options struct {
	// Clock replaces the wall clock.
	Clock clock.Clock
	// Process names a long-running process (worker, scheduler, serve,
	// dev): it traces when OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_
	// form) is set, and Close flushes its spans. One-shot commands leave
	// it empty and never trace.
	Process string
}

// Open connects to the database (applying migrations when
// database.auto_migrate is set) and prepares everything else.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (*App, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	redisOpt, err := RedisConn(cfg.Redis)
	if err != nil {
		return nil, err
	}
	box, err := secretbox.New(cfg.Secrets.Key)
	if err != nil {
		return nil, err
	}
	db, err := store.OpenWith(cfg.Database.URL, store.Options{MaxOpenConns: cfg.Database.MaxOpenConns})
	if err != nil {
		return nil, err
	}
	if cfg.Database.AutoMigrate {
		if _, err := store.Migrate(ctx, db); err != nil {
			_ = store.Close(db)
			return nil, fmt.Errorf("migrate database: %w", err)
		}
	}
	// Tracing comes first: the sender's transport is instrumented only in
	// a process that traces.
	traces, err := otlp.Start(ctx, tracingEnv(opts.Process), opts.Process, Version)
	if err != nil {
		_ = store.Close(db)
		return nil, err
	}
	sc := SenderConfig(cfg.Delivery)
	if traces != nil {
		sc.WrapTransport = otlp.Transport(cfg.Tracing.PropagateToReceivers)
		log.Info("tracing on: exporting spans over OTLP", "propagate_to_receivers", cfg.Tracing.PropagateToReceivers)
	}
	sender := send.NewSender(sc)
	// Webhooks' rate_limit is one budget in Redis for every worker.
	rateRedis, _ := redisOpt.MakeRedisClient().(redis.UniversalClient)
	var (
		limiter dispatch.Limiter
		rl      *ratelimit.Limiter
	)
	if rateRedis != nil {
		rl = ratelimit.New(rateRedis)
		limiter = rl
	}
	ops := opsevent.New(opsevent.Config{CopyTo: cfg.OpsEvents.CopyTo, ConsoleURL: cfg.OpsEvents.ConsoleURL}, log)
	hand := handoff.New(rateRedis, log).Bound(handoff.NewLabels(cfg.Metrics.MaxTenantLabels, cfg.Metrics.MaxWebhookLabels, cfg.Metrics.MaxWebhookLabelsPerTenant))
	d := dispatch.New(db, sender, box, dispatch.Config{
		Schedule:     dispatch.Schedule(cfg.Retry.Schedule),
		DisableAfter: cfg.Health.DisableAfter,
		Logger:       log,
		Clock:        opts.Clock,
		Limiter:      limiter,
		Observer:     hand,
		// Bodies are capped while they render, not after.
		MaxPayloadBytes:    cfg.Delivery.MaxPayloadBytes,
		RenderTimeLimit:    cfg.Delivery.TemplateTimeLimit,
		ConditionTimeLimit: cfg.Delivery.ConditionTimeLimit,
		// Event tasks' own first attempts in flight, like the tasks'.
		InlineRequests: cfg.Worker.Concurrency,
		// One tenant's requests in flight (worker.tenant_share).
		TenantRequests: cfg.Worker.TenantRequests(),
		Ops:            ops,
	})
	a := &App{
		Config: cfg, Log: log, Clock: opts.Clock, DB: db, Redis: redisOpt,
		Box: box, Sender: sender, Dispatcher: d, Ops: ops, rateRedis: rateRedis, Limiter: rl, Handoff: hand, traces: traces,
		Database: dbstate.New(dbstate.Config{Probe: store.Probe(db), Clock: opts.Clock, Logger: log}),
	}
	return a, nil
}

// Guard is the SSRF guard of cfg, or nil when delivery.allow_private_networks
// is on.
func Guard(cfg config.Delivery) *send.Guard {
	if cfg.AllowPrivateNetworks {
		return nil
	}
	return send.NewGuard(cfg.AllowedNetworks)
}

// SenderConfig is the sender every Homing process uses: Homing's
// User-Agent, and the SSRF guard at dial time unless private networks are
// allowed.
func SenderConfig(cfg config.Delivery) send.SenderConfig {
	sc := send.SenderConfig{UserAgent: UserAgent()}
	if g := Guard(cfg); g != nil {
		sc.DialControl = g.Control
	}
	return sc
}

// Relay builds this process's outbox relay, enqueuing with client and
// reading the state of lost events' tasks with insp: woken by PostgreSQL's
// NOTIFY on commit, and polling every outbox.poll_interval (only polling on
// SQLite).
func (a *App) Relay(client *asynq.Client, insp *asynq.Inspector) *outbox.Relay {
	return outbox.NewRelay(a.DB, client, a.relayConfig(insp))
}

// DrainingRelay is Relay for homing serve: its Stop queues what is left in
// the outbox.
func (a *App) DrainingRelay(client *asynq.Client, insp *asynq.Inspector) *outbox.Relay {
	cfg := a.relayConfig(insp)
	cfg.DrainOnStop = true
	return outbox.NewRelay(a.DB, client, cfg)
}

func (a *App) relayConfig(insp *asynq.Inspector) outbox.RelayConfig {
	listen := ""
	if store.DialectOf(a.DB) == store.Postgres {
		listen = a.Config.Database.URL
	}
	return outbox.RelayConfig{
		PollInterval: a.Config.Outbox.PollInterval,
		RecoverAfter: a.Config.Outbox.RecoverAfter,
		Inspector:    insp,
		ListenURL:    listen,
		Database:     a.Database,
		Logger:       a.Log,
		Clock:        a.Clock,
	}
}

// Inspector reads asynq's queues over the App's Redis connection and is
// done with when the App is closed; nil when that connection is not a
// go-redis client.
func (a *App) Inspector() *asynq.Inspector {
	if a.rateRedis == nil {
		return nil
	}
	return asynq.NewInspectorFromRedisClient(a.rateRedis)
}

// Queue is an asynq client over the App's Redis connection, for queueing
// tasks from a request (homing serve's accepted events); nil when that
// connection is not a go-redis client. Closing it leaves the connection
// open: the App closes it.
func (a *App) Queue() *asynq.Client {
	if a.rateRedis == nil {
		return nil
	}
	return asynq.NewClientFromRedisClient(a.rateRedis)
}

// tracingEnv is how a process reads the OTEL_* variables: os.Getenv for a
// long-running process, nothing for a one-shot command.
func tracingEnv(process string) func(string) string {
	if process == "" {
		return func(string) string { return "" }
	}
	return os.Getenv
}

// traceFlushTimeout bounds the export of the spans still batched at Close.
const traceFlushTimeout = 5 * time.Second

// Close sends the delivery outcomes still to be handed off, exports the
// spans still batched, then releases the database pool and idle
// connections.
func (a *App) Close() error {
	a.Handoff.Flush() // counts still on their way to Redis
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	if err := a.traces.Shutdown(ctx); err != nil {
		a.Log.Warn("spans not exported at stop", "error", err.Error())
	}
	cancel()
	a.Sender.Close()
	if a.rateRedis != nil {
		_ = a.rateRedis.Close()
	}
	return store.Close(a.DB)
}

// RedisConn turns the redis settings into asynq's connection options: a
// Sentinel failover client, a cluster client (both tuned for failover by
// package redisconn), or one server from redis.url.
// Password and TLS for Sentinel and Cluster come from redis.url's userinfo
// and scheme.
func RedisConn(r config.Redis) (asynq.RedisConnOpt, error) {
	return redisconn.Settings{URL: r.URL, SentinelMaster: r.Sentinel.Master, SentinelAddrs: r.Sentinel.Addrs, ClusterAddrs: r.Cluster.Addrs}.Opt()
}

// ClientConfig is a publisher's configuration (package client) taken from
// Homing's: Redis and the payload limit. workflow_transition events need
// Transitions too (transition.New(transition.FromConfig(c))).
func ClientConfig(c config.Config) client.Config {
	return client.Config{
		RedisURL:            c.Redis.URL,
		RedisSentinelMaster: c.Redis.Sentinel.Master,
		RedisSentinelAddrs:  c.Redis.Sentinel.Addrs,
		RedisClusterAddrs:   c.Redis.Cluster.Addrs,
		MaxPayloadBytes:     c.Delivery.MaxPayloadBytes,
	}
}
