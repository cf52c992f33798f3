package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/httpserve"
	"github.com/homingdev/homing/monitor"
	"github.com/homingdev/homing/token"
)

// devExtras starts, on the dev Redis, the asynqmon UI on e.devMonitorAddr
// and the HTTP API on e.devAPIAddr (empty disables either).
func (e *env) devExtras(a *app.App) (func(), error) {
	var servers []interface{ Stop(context.Context) error }
	stopAll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Stop(ctx)
		}
	}
	if e.devMonitorAddr != "" {
		srv := monitor.NewServer(e.devMonitorAddr, a.Redis, false, config.MonitorAuth{}, a.Log)
		if err := srv.Start(); err != nil {
			return nil, fmt.Errorf("--monitor-addr %s: %w", e.devMonitorAddr, err)
		}
		servers = append(servers, srv)
		fmt.Fprintf(e.stdout, "  asynqmon UI    : http://%s/\n", srv.Addr())
		if a.Config.API.AsynqmonURL == "" {
			a.Config.API.AsynqmonURL = "http://" + srv.Addr()
		}
	}
	if e.devAPIAddr != "" {
		// Events published over HTTP reach the queue through the outbox
		// relay dev mode runs.
		srv := httpserve.New("api", e.devAPIAddr, httpHandler(a, token.New(a.DB, a.Clock, a.Log)), a.Log)
		if err := srv.Start(); err != nil {
			stopAll()
			return nil, fmt.Errorf("--api-addr %s: %w", e.devAPIAddr, err)
		}
		servers = append(servers, srv)
		fmt.Fprintf(e.stdout, "  HTTP API       : http://%s/v1/ (bearer tokens: homing token create --name N --scope admin)\n", srv.Addr())
		fmt.Fprintf(e.stdout, "  console        : http://%s/console/ (sign in with an admin token)\n", srv.Addr())
	}
	return stopAll, nil
}
