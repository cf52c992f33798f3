package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/worker"
)

// startInProcessWorker runs Homing's worker inside the harness, configured
// from environ exactly as the worker binary would be, and CPU-profiles it
// into path until the returned stop is called. It is for finding where a
// delivery's time goes (go tool pprof), not for the reported numbers.
func startInProcessWorker(ctx context.Context, environ []string, path string) (func(), error) {
	cfg, err := config.LoadFrom("", environ)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewJSONHandler(devNull{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := app.Open(ctx, cfg, log, app.Options{})
	if err != nil {
		return nil, err
	}
	w := worker.New(a)
	f, err := os.Create(path)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		_ = a.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := w.Start(ctx); err != nil {
		pprof.StopCPUProfile()
		_ = f.Close()
		_ = a.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		_ = w.Stop(context.Background())
		_ = a.Close()
	}, nil
}

// devNull counts as the worker's log output: formatted, then dropped.
type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }
