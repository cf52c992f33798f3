package cli

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/ops/monitor"
	"github.com/homingdev/homing/internal/wiring/app"
)

func newMonitorCmd(e *env) *cobra.Command {
	var (
		addr      string
		readWrite bool
	)
	cmd := &cobra.Command{
		Use:   "monitor [--addr 127.0.0.1:8080] [--read-write]",
		Short: "Serve the asynqmon UI for the configured Redis (read-only unless --read-write)",
		Long: "monitor serves asynqmon, which shows task payloads (documents), on 127.0.0.1:8080 unless\n" +
			"--addr says otherwise. Set monitor.auth (HOMING_MONITOR_AUTH) to \"bearer:TOKEN\" or\n" +
			"\"basic:USER:PASSWORD\" to require credentials; listening beyond loopback without them\n" +
			"logs a warning.",
		Args: argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := e.configured()
			if err != nil {
				return err
			}
			redis, err := app.RedisConn(cfg.Redis)
			if err != nil {
				return err
			}
			ctx, stop := untilSignalled(cmd.Context())
			defer stop()
			auth, err := config.ParseMonitorAuth(cfg.Monitor.Auth)
			if err != nil {
				return fmt.Errorf("monitor.auth: %w", err)
			}
			srv := monitor.NewServer(addr, redis, !readWrite, auth, log)
			if err := srv.Start(ctx); err != nil {
				return fmt.Errorf("--addr %s: %w", addr, err)
			}
			log.Info("monitor started", "addr", srv.Addr(), "read_only", !readWrite, "auth", auth != config.MonitorAuth{})
			if auth == (config.MonitorAuth{}) && !loopback(srv.Addr()) {
				log.Warn("the monitor shows task payloads (documents) to anyone who can reach "+srv.Addr()+": set monitor.auth (HOMING_MONITOR_AUTH=bearer:TOKEN or basic:USER:PASSWORD) or listen on 127.0.0.1", "addr", srv.Addr())
			}
			fmt.Fprintf(e.stdout, "asynqmon UI on http://%s/\n", srv.Addr())
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Stop(sctx)
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen `ADDR` for the UI (\":8080\" for every interface: set monitor.auth then)")
	cmd.Flags().BoolVar(&readWrite, "read-write", false, "allow deleting, archiving and running tasks from the UI")
	return cmd
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return (err == nil && ip.IsLoopback()) || host == "localhost"
}
