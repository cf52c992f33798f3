package cli

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/devmode"
)

// stoppingDev is what homing dev and homing run do once signalled: stop
// listening for signals, so that a second Ctrl-C ends the process at once,
// and say what the wait is for.
func stoppingDev(stop context.CancelFunc, cfg config.Config, log *slog.Logger) func() {
	return func() {
		stop()
		log.Info("stopping: finishing deliveries and requests in flight (Ctrl-C again quits at once)", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
	}
}

func newDevCmd(e *env) *cobra.Command {
	var opts devmode.Options
	cmd := &cobra.Command{
		Use:   "dev [--fast] [--redis-addr 127.0.0.1:0]",
		Short: "Run everything in one process with an embedded, in-memory Redis (for trying Homing)",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := e.configured()
			if err != nil {
				return err
			}
			ctx, stop := untilSignalled(cmd.Context())
			defer stop()
			e.devAPISetting = "--api-addr"
			opts.Started = func(a *app.App) { warnAtStart(ctx, a, workerQueues(a)) }
			opts.Out, opts.Stopping = e.stdout, stoppingDev(stop, cfg, log)
			opts.Extra = e.devExtras
			opts.AdminToken = e.devAPIAddr != ""
			return devmode.Run(ctx, cfg, log, opts)
		}),
	}
	cmd.Flags().BoolVar(&opts.Fast, "fast", false, "compressed retry schedule (5s,10s,20s) and a sweep every second")
	cmd.Flags().StringVar(&e.devMonitorAddr, "monitor-addr", "127.0.0.1:8080", "loopback `ADDR` for the asynqmon UI (empty disables it)")
	cmd.Flags().StringVar(&e.devAPIAddr, "api-addr", "127.0.0.1:8088", "loopback `ADDR` for the HTTP API (empty disables it)")
	cmd.Flags().StringVar(&opts.RedisAddr, "redis-addr", "127.0.0.1:0", "loopback `ADDR` for the embedded Redis (port 0 picks a free one)")
	return cmd
}

func newRunCmd(e *env) *cobra.Command {
	var opts devmode.Options
	cmd := &cobra.Command{
		Use:   "run [--monitor-addr 127.0.0.1:8080]",
		Short: "Run the worker, the scheduler, the HTTP API and console on a real Redis, on 127.0.0.1 (make run)",
		Long: "run is make run: a worker, the scheduler (with the outbox relay), the HTTP API with the\n" +
			"console on api.addr, and the asynqmon UI, in one process on the configured Redis and\n" +
			"database (SQLite by default, migrated at start). It listens on 127.0.0.1 only (the defaults\n" +
			"127.0.0.1:8088 and 127.0.0.1:9464; an address without a host is made loopback). Without secrets.key it uses the dev\n" +
			"key homing dev keeps; it prints the console's URL and an admin token (kept, and replaced\n" +
			"only when the database no longer knows it). Ctrl-C stops every part gracefully.\n" +
			"When no Redis answers it runs homing dev instead (an embedded, in-memory Redis).",
		Args: argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := e.configured()
			if err != nil {
				return err
			}
			ctx, stop := untilSignalled(cmd.Context())
			defer stop()
			e.devAPIAddr, e.devAPISetting = devmode.Loopback(cfg.API.Addr), "api.addr, HOMING_API_ADDR"
			opts.Started = func(a *app.App) { warnAtStart(ctx, a, workerQueues(a)) }
			opts.Out, opts.Stopping = e.stdout, stoppingDev(stop, cfg, log)
			opts.Extra = e.devExtras
			opts.AdminToken = e.devAPIAddr != ""
			redis, err := app.RedisConn(cfg.Redis)
			if err != nil {
				return err
			}
			if err := pingRedis(ctx, redis); err != nil {
				log.Warn("no Redis answers: running homing dev instead, on an embedded Redis that keeps queued tasks in memory only; start Redis (scripts/services.sh redis-only) or set HOMING_REDIS_URL for tasks that survive a restart",
					"redis_url", cfg.Redis.URL, "error", err.Error())
				return devmode.Run(ctx, cfg, log, opts)
			}
			opts.RealRedis = true
			return devmode.Run(ctx, cfg, log, opts)
		}),
	}
	cmd.Flags().StringVar(&e.devMonitorAddr, "monitor-addr", "127.0.0.1:8080", "`ADDR` for the asynqmon UI (empty disables it)")
	return cmd
}
