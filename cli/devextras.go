package cli

import (
	"fmt"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/httpserve"
	"github.com/homingdev/homing/monitor"
	"github.com/homingdev/homing/process"
	"github.com/homingdev/homing/token"
)

// devExtras gives, on the dev Redis, the asynqmon UI on e.devMonitorAddr
// and the HTTP API on e.devAPIAddr (empty disables either).
func (e *env) devExtras(a *app.App) ([]process.Named, error) {
	var parts []process.Named
	if e.devMonitorAddr != "" {
		srv := monitor.NewServer(e.devMonitorAddr, a.Redis, false, config.MonitorAuth{}, a.Log)
		parts = append(parts, process.Named{Name: "the asynqmon UI on --monitor-addr " + e.devMonitorAddr, Service: srv,
			Banner: func() string { return fmt.Sprintf("  asynqmon UI    : http://%s/\n", srv.Addr()) }})
		if a.Config.API.AsynqmonURL == "" {
			// Known before it is started: its address is fixed by the flag.
			a.Config.API.AsynqmonURL = "http://" + e.devMonitorAddr
		}
	}
	if e.devAPIAddr != "" {
		// Events published over HTTP reach the queue through the outbox
		// relay dev mode runs.
		srv := httpserve.New("api", e.devAPIAddr, httpHandler(a, token.New(a.DB, a.Clock, a.Log)), a.Log)
		parts = append(parts, process.Named{Name: "the HTTP API on --api-addr " + e.devAPIAddr, Service: srv,
			Banner: func() string {
				return fmt.Sprintf("  HTTP API       : http://%s/v1/ (bearer tokens: homing token create --name N --scope admin)\n", srv.Addr()) +
					fmt.Sprintf("  console        : http://%s/console/ (sign in with an admin token)\n", srv.Addr())
			}})
	}
	return parts, nil
}
