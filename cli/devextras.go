package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/monitor"
)

// devExtras starts the asynqmon UI on the dev Redis, on e.devMonitorAddr
// (empty disables it).
func (e *env) devExtras(a *app.App) (func(), error) {
	if e.devMonitorAddr == "" {
		return func() {}, nil
	}
	srv := monitor.NewServer(e.devMonitorAddr, a.Redis, false, a.Log)
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("--monitor-addr %s: %w", e.devMonitorAddr, err)
	}
	fmt.Fprintf(e.stdout, "  asynqmon UI    : http://%s/\n", srv.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	}, nil
}
