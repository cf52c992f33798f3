package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/process"
)

// untilSignalled is the context a long-running command runs in: it ends on
// SIGINT or SIGTERM, and the command then stops gracefully.
func untilSignalled(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// pingRedis fails fast, with a message naming the setting to fix, when
// Redis cannot be reached at start-up; asynq itself would start anyway and
// log connection errors forever.
func pingRedis(ctx context.Context, opt asynq.RedisConnOpt) error {
	rdb, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil
	}
	defer func() { _ = rdb.Close() }()
	ctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis (check redis.url or HOMING_REDIS_URL): %w", err)
	}
	return nil
}

// runService runs a long-running command: it loads the configuration, builds
// the logger, opens the App and calls fn, whose ctx ends on SIGINT or
// SIGTERM; fn calls stop once it has seen that, so that a second signal
// ends the process at once. Redis client logs stay at debug level until fn
// raises them, since a failed start-up ping reports for itself.
func (e *env) runService(cmd *cobra.Command, fn func(ctx context.Context, stop context.CancelFunc, a *app.App) error) error {
	cfg, log, err := e.configured()
	if err != nil {
		return err
	}
	routeRedisLogs(log, slog.LevelDebug)
	stopProfile, err := startCPUProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := untilSignalled(cmd.Context())
	defer stop()
	a, err := app.Open(ctx, cfg, log, app.Options{Process: cmd.Name()})
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	return fn(ctx, stop, a)
}

// redisPingTimeout bounds the start-up check of Redis.
const redisPingTimeout = 10 * time.Second

func newWorkerCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the worker: fan-out, first attempts, retries and sweeps, until signalled",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.runService(cmd, func(ctx context.Context, stop context.CancelFunc, a *app.App) error {
				cfg, log := a.Config, a.Log
				if err := pingRedis(ctx, a.Redis); err != nil {
					return err
				}
				r, w := process.Worker(a)
				r.Stopping = func() {
					stop() // a second signal now ends the process at once
					log.Info("worker stopping: finishing in-flight deliveries", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
				}
				err := r.Run(ctx, func() {
					routeRedisLogs(log, slog.LevelWarn)
					started := append([]any{"concurrency", cfg.Worker.Concurrency, "queues", cfg.Worker.Queues}, sqliteFile(cfg)...)
					if addr := w.MetricsAddr(); addr != "" {
						started = append(started, "metrics_addr", addr)
					}
					log.Info("worker started", started...)
					warnAtStart(ctx, a, workerQueues(a))
				})
				if err == nil {
					log.Info("worker stopped")
				}
				return err
			})
		}),
	}
}

func newSchedulerCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler: enqueue a sweep every sweeper.interval and relay the outbox, until signalled",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			// The scheduler opens the database too: it is the outbox the
			// relay moves into Redis.
			return e.runService(cmd, func(ctx context.Context, stop context.CancelFunc, a *app.App) error {
				cfg, log := a.Config, a.Log
				if err := pingRedis(ctx, a.Redis); err != nil {
					return err
				}
				r, err := process.Scheduler(a)
				if err != nil {
					return err
				}
				r.Stopping = stop
				err = r.Run(ctx, func() {
					routeRedisLogs(log, slog.LevelWarn)
					log.Info("scheduler started", "sweep_interval", cfg.Sweeper.Interval.String(), "outbox_poll_interval", cfg.Outbox.PollInterval.String())
					warnAtStart(ctx, a, nil)
				})
				if err == nil {
					log.Info("scheduler stopped")
				}
				return err
			})
		}),
	}
}
