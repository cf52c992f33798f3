package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/process"
)

func newServeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API on api.addr and relay the outbox, until signalled",
		Long: "serve answers the HTTP API (POST /v1/events, /v1/webhooks, /v1/deliveries; the document\n" +
			"is at /v1/openapi.json) and the delivery console (/console/) on api.addr. Requests need a\n" +
			"bearer token: homing token create.\n" +
			"It runs an outbox relay too, so published events reach the queue within milliseconds\n" +
			"without waiting on the scheduler's. On SIGINT or SIGTERM it stops accepting and finishes\n" +
			"requests in flight within worker.shutdown_timeout.",
		Args: argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.runService(cmd, func(ctx context.Context, stop context.CancelFunc, a *app.App) error {
				cfg, log := a.Config, a.Log
				// Publishing needs only the database; the relay catches up once
				// Redis answers, so a Redis that is away is a warning, not a
				// reason to refuse events.
				if err := pingRedis(ctx, a.Redis); err != nil {
					log.Warn("events are accepted into the outbox and relayed once Redis answers", "error", err.Error())
				}
				tokens := token.New(a.DB, a.Clock, log)
				r, srv := process.Serve(a, httpHandler(a, tokens))
				r.Stopping = func() {
					stop() // a second signal now ends the process at once
					log.Info("api stopping: finishing requests in flight", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
				}
				err := r.Run(ctx, func() {
					routeRedisLogs(log, slog.LevelWarn)
					log.Info("api started", append([]any{"addr", srv.Addr(), "outbox_poll_interval", cfg.Outbox.PollInterval.String()}, sqliteFile(cfg)...)...)
					warnWithoutTokens(ctx, tokens, log)
					warnAtStart(ctx, a, nil)
				})
				if se := (*app.StartError)(nil); errors.As(err, &se) && se.Part == "api" {
					return fmt.Errorf("api.addr %q: %w (choose a free port with api.addr or HOMING_API_ADDR)", cfg.API.Addr, se.Err)
				}
				if err == nil {
					log.Info("api stopped")
				}
				return err
			})
		}),
	}
}

// httpHandler is what `homing serve` and `homing dev` answer on their API
// address: the console under /console/, the API everywhere else, both on
// the same services.
func httpHandler(a *app.App, tokens *token.Service) http.Handler {
	cfg := apiConfig(a, tokens)
	var tasks console.TaskLookup
	if in := a.Inspector(); in != nil {
		tasks = in
	}
	mux := http.NewServeMux()
	pages := console.New(console.Config{
		DB: cfg.DB, Webhooks: cfg.Webhooks, Recovery: cfg.Recovery, Tokens: tokens,
		AsynqmonURL: a.Config.API.AsynqmonURL, Tasks: tasks, DisableAfter: a.Config.Health.DisableAfter,
		Portal: cfg.Portal, Tenants: cfg.Tenants, Database: a.Database, Clock: a.Clock, Logger: a.Log,
	})
	// The pages are bounded as the API's routes are: one intake budget
	// for everything served on this address, each page request charged
	// to its session's tenant.
	routes := api.New(cfg)
	bounded := routes.Admit(pages, pages.Sessions)
	mux.Handle(console.Prefix, bounded)
	mux.Handle(console.PortalPrefix, bounded) // the same pages, scoped by a portal link's session
	mux.Handle("/", routes)
	return mux
}

// apiConfig wires the API to a's services: the same webhook service, recovery
// and dispatcher as the command line and the worker.
func apiConfig(a *app.App, tokens *token.Service) api.Config {
	cfg := api.Config{
		DB:               a.DB,
		Dispatcher:       a.Dispatcher,
		Webhooks:         webhookService(a),
		Recovery:         recovery.New(a.DB, a.Clock, a.Config.Delivery.MaxPayloadBytes),
		Tokens:           tokens,
		Tenants:          tenants(a),
		Portal:           portalLinks(a),
		MaxBodyBytes:     int64(a.Config.API.MaxBodyBytes),
		MaxPayloadBytes:  a.Config.Delivery.MaxPayloadBytes,
		MaxInflightBytes: maxInflightBytes(a.Config.API.MaxInflightBytes),
		// One tenant's requests in flight hold at most this share of it.
		TenantInflightShare: a.Config.API.TenantInflightShare,
		// Ready while the database answers and takes writes: events are
		// accepted into the outbox even while Redis is away.
		Database: a.Database,
		Ready:    a.Database.Ready,
		Warnings: readyWarnings(a),
		Clock:    a.Clock,
		Logger:   a.Log,
	}
	if a.Limiter != nil {
		cfg.PublishLimiter = a.Limiter
		// Resends, retries, recovers and test sends through serve (the
		// API, the console, the portal) are charged to their tenant's
		// action_rate; the command line's are not.
		actions := tenant.NewActions(cfg.Tenants, a.Limiter, a.Log)
		cfg.Webhooks.SetActions(actions)
		cfg.Recovery.SetActions(actions)
	}
	// Accepted events are queued by the request that accepted them, not
	// at the relay's next wake-up (outbox.Writer).
	cfg.Queue = a.Queue()
	return cfg
}

// portalLinks issues and opens portal links with a key derived from
// secrets.key; without one it is nil, and the API says what to set.
func portalLinks(a *app.App) *portal.Links {
	key := a.Box.Subkey(portal.KeyLabel)
	if key == nil {
		return nil
	}
	return portal.New(a.DB, key, a.Clock)
}

// warnWithoutTokens tells the operator that every request will be refused
// until a token exists.
func warnWithoutTokens(ctx context.Context, tokens *token.Service, log *slog.Logger) {
	list, err := tokens.List(ctx)
	if err == nil && len(list) == 0 {
		log.Warn("no API token exists: every request will be refused with 401; create one with homing token create --name NAME [--scope admin]")
	}
}

// maxInflightBytes is api.max_inflight_bytes, or half of the process's
// memory limit when it is 0: the limit LimitMemory set from
// process.memory_limit, or GOMEMLIMIT, which wins.
func maxInflightBytes(configured int64) int64 {
	if configured > 0 {
		return configured
	}
	if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
		return limit / 2
	}
	return api.DefaultMaxInflightBytes
}
