package cli

import (
	"fmt"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/lib/httpserve"
	"github.com/homingdev/homing/internal/ops/monitor"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/process"
)

// devExtras gives, on the run's Redis, the HTTP API and console on
// e.devAPIAddr and the asynqmon UI on e.devMonitorAddr (empty disables
// either): the parts homing dev and homing run add to the core.
func (e *env) devExtras(a *app.App) ([]process.Named, error) {
	var parts []process.Named
	if e.devAPIAddr != "" {
		// Events published over HTTP reach the queue through the outbox
		// relay the run has.
		if a.Config.API.AsynqmonURL == "" && e.devMonitorAddr != "" {
			// Known before it is started: its address is fixed by the flag.
			a.Config.API.AsynqmonURL = "http://" + e.devMonitorAddr
		}
		srv := httpserve.New("api", e.devAPIAddr, httpHandler(a, token.New(a.DB, a.Clock, a.Log)), a.Log)
		parts = append(parts, process.Named{Name: "the HTTP API on " + e.devAPIAddr + " (" + e.devAPISetting + ")", Service: srv,
			Banner: func() string {
				return fmt.Sprintf("  console        : http://%s/console/\n", srv.Addr()) +
					fmt.Sprintf("  HTTP API       : http://%s/v1/\n", srv.Addr())
			}})
	}
	if e.devMonitorAddr != "" {
		srv := monitor.NewServer(e.devMonitorAddr, a.Redis, false, config.MonitorAuth{}, a.Log)
		parts = append(parts, process.Named{Name: "the asynqmon UI on " + e.devMonitorAddr + " (--monitor-addr)", Service: srv,
			Banner: func() string { return fmt.Sprintf("  asynqmon UI    : http://%s/\n", srv.Addr()) }})
	}
	return parts, nil
}
