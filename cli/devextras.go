package cli

import (
	"fmt"

	"github.com/homingdev/homing/api"
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
	}
	if e.devAPIAddr != "" {
		// Events published over HTTP reach the queue through the outbox
		// relay dev mode runs.
		srv := httpserve.New("api", e.devAPIAddr, api.New(apiConfig(a, token.New(a.DB, a.Clock, a.Log))), a.Log)
		parts = append(parts, process.Named{Name: "the HTTP API on --api-addr " + e.devAPIAddr, Service: srv,
			Banner: func() string {
				return fmt.Sprintf("  HTTP API       : http://%s/v1/ (bearer tokens: homing token create --name N --scope admin)\n", srv.Addr())
			}})
	}
	return parts, nil
}
