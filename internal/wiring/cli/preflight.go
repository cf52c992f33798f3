package cli

import (
	"context"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/internal/wiring/app"
)

// preflightInputs are the start-up checks' inputs for a's process; served
// are the queues the process itself serves (a worker's).
func preflightInputs(a *app.App, served []string) preflight.Inputs {
	return preflight.Inputs{Config: a.Config, DB: a.DB, Redis: a.Redis, Box: a.Box, Environ: os.Environ(), ServedHere: served}
}

// warnAtStart logs each start-up check's problem as a WARN naming what to
// change.
func warnAtStart(ctx context.Context, a *app.App, served []string) {
	preflight.Log(a.Log, preflight.Run(ctx, preflightInputs(a, served)))
}

// workerQueues are the queues a worker with a's configuration serves.
func workerQueues(a *app.App) []string {
	return slices.Sorted(maps.Keys(a.Config.Worker.Queues))
}

// readyWarnings lists the start-up checks' problems for /readyz, checked
// at most once a minute.
func readyWarnings(a *app.App) func(ctx context.Context) []string {
	cached := preflight.NewCached(preflightInputs(a, nil), time.Minute, a.Clock.Now)
	return func(ctx context.Context) []string {
		var out []string
		for _, p := range cached.Problems(ctx) {
			out = append(out, p.String())
		}
		return out
	}
}
