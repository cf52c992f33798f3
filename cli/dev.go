package cli

import (
	"github.com/spf13/cobra"

	"github.com/homingdev/homing/devmode"
)

func newDevCmd(e *env) *cobra.Command {
	var opts devmode.Options
	cmd := &cobra.Command{
		Use:   "dev [--fast] [--redis-addr 127.0.0.1:0]",
		Short: "Run everything in one process with an embedded, in-memory Redis (for trying Homing)",
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
			ctx, stop := untilSignalled(cmd.Context())
			defer stop()
			opts.Out = e.stdout
			opts.Extra = e.devExtras
			return devmode.Run(ctx, cfg, log, opts)
		}),
	}
	cmd.Flags().BoolVar(&opts.Fast, "fast", false, "compressed retry schedule (5s,10s,20s) and a sweep every second")
	cmd.Flags().StringVar(&e.devMonitorAddr, "monitor-addr", "127.0.0.1:8080", "loopback `ADDR` for the asynqmon UI (empty disables it)")
	cmd.Flags().StringVar(&e.devAPIAddr, "api-addr", "127.0.0.1:8088", "loopback `ADDR` for the HTTP API (empty disables it)")
	cmd.Flags().StringVar(&opts.RedisAddr, "redis-addr", "127.0.0.1:0", "loopback `ADDR` for the embedded Redis (port 0 picks a free one)")
	return cmd
}
