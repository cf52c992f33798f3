package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/api"
	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/internal/httpserve"
	"github.com/homingdev/homing/recovery"
	"github.com/homingdev/homing/token"
)

func newServeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API on api.addr, until signalled",
		Long: "serve answers the HTTP API (POST /v1/events, /v1/webhooks, /v1/deliveries; the document\n" +
			"is at /v1/openapi.json) on api.addr. Requests need a bearer token: homing token create.\n" +
			"On SIGINT or SIGTERM it stops accepting and finishes requests in flight within\n" +
			"worker.shutdown_timeout.",
		Args: argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			cfg, err := e.config()
			if err != nil {
				return err
			}
			log, err := e.logger(cfg)
			if err != nil {
				return err
			}
			ctx, stop := untilSignalled(cmd.Context())
			defer stop()
			a, err := app.Open(ctx, cfg, log, app.Options{})
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			tokens := token.New(a.DB, a.Clock, log)
			srv := httpserve.New("api", cfg.API.Addr, api.New(apiConfig(a, tokens)), log)
			if err := srv.Start(); err != nil {
				return fmt.Errorf("api.addr %q: %w (choose a free port with api.addr or HOMING_API_ADDR)", cfg.API.Addr, err)
			}
			log.Info("api started", "addr", srv.Addr())
			warnWithoutTokens(ctx, tokens, log)
			<-ctx.Done()
			stop() // a second signal now ends the process at once
			log.Info("api stopping: finishing requests in flight", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
			sctx, cancel := context.WithTimeout(context.Background(), cfg.Worker.ShutdownTimeout)
			defer cancel()
			err = srv.Stop(sctx)
			log.Info("api stopped")
			return err
		}),
	}
}

// apiConfig wires the API to a's services: the same webhook service, recovery
// and dispatcher as the command line and the worker.
func apiConfig(a *app.App, tokens *token.Service) api.Config {
	return api.Config{
		DB:              a.DB,
		Dispatcher:      a.Dispatcher,
		Webhooks:        webhookService(a),
		Recovery:        recovery.New(a.DB, a.Clock),
		Tokens:          tokens,
		MaxBodyBytes:    int64(a.Config.API.MaxBodyBytes),
		MaxPayloadBytes: a.Config.Delivery.MaxPayloadBytes,
		// Ready while the database answers: events are accepted into the
		// outbox even while Redis is away.
		Ready: func(ctx context.Context) error {
			sqlDB, err := a.DB.DB()
			if err != nil {
				return fmt.Errorf("database: %w", err)
			}
			if err := sqlDB.PingContext(ctx); err != nil {
				return fmt.Errorf("database: %w", err)
			}
			return nil
		},
		Clock:  a.Clock,
		Logger: a.Log,
	}
}

// warnWithoutTokens tells the operator that every request will be refused
// until a token exists.
func warnWithoutTokens(ctx context.Context, tokens *token.Service, log *slog.Logger) {
	list, err := tokens.List(ctx)
	if err == nil && len(list) == 0 {
		log.Warn("no API token exists: every request will be refused with 401; create one with homing token create --name NAME [--scope admin]")
	}
}
