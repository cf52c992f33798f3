package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/monitor"
)

func newMonitorCmd(e *env) *cobra.Command {
	var (
		addr      string
		readWrite bool
	)
	cmd := &cobra.Command{
		Use:   "monitor [--addr :8080] [--read-write]",
		Short: "Serve the asynqmon UI for the configured Redis (read-only unless --read-write)",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			cfg, err := e.config()
			if err != nil {
				return err
			}
			log, err := e.logger(cfg)
			if err != nil {
				return err
			}
			redis, err := app.RedisConn(cfg.Redis)
			if err != nil {
				return err
			}
			ctx, stop := untilSignalled(cmd.Context())
			defer stop()
			srv := monitor.NewServer(addr, redis, !readWrite, log)
			if err := srv.Start(); err != nil {
				return fmt.Errorf("--addr %s: %w", addr, err)
			}
			log.Info("monitor started", "addr", srv.Addr(), "read_only", !readWrite)
			fmt.Fprintf(e.stdout, "asynqmon UI on http://%s/\n", srv.Addr())
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Stop(sctx)
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", ":8080", "listen `ADDR` for the UI")
	cmd.Flags().BoolVar(&readWrite, "read-write", false, "allow deleting, archiving and running tasks from the UI")
	return cmd
}
