// Package devmode runs all of Homing in one process for trying it on a
// laptop with nothing installed: an embedded Redis (miniredis) on a loopback
// port other shells can reach, the SQLite default database, a worker, the
// scheduler and, when asked, the asynqmon UI.
package devmode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/process"
)

// FastSchedule is the compressed schedule of --fast: the whole retry story in
// seconds instead of hours.
const FastSchedule = "5s,10s,20s"

// Options configures a dev run.
type Options struct {
	// RedisAddr is where the embedded Redis listens (127.0.0.1:0 picks a port).
	RedisAddr string
	// Fast compresses the retry schedule and the sweep interval.
	Fast bool
	// Out receives the banner.
	Out io.Writer
	// OnReady, when set, is called with the embedded Redis URL once every
	// part is running (tests use it instead of parsing the banner).
	OnReady func(redisURL string)
	// StateDir is where the dev secrets.key is kept (see Key); empty means
	// StateDir(os.Environ()). Unused when secrets.key is configured.
	StateDir string
	// Extra, when set, gives more parts (the monitor UI, the HTTP API) to
	// run on the dev Redis and database, started after the core and
	// stopped before it.
	Extra func(a *app.App) ([]process.Named, error)
}

// Run starts everything and blocks until ctx is done, then stops it all.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) error {
	if opts.RedisAddr == "" {
		opts.RedisAddr = "127.0.0.1:0"
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if cfg.Secrets.Key == "" {
		// Without a key, the first webhook made with --secret would stall.
		if opts.StateDir == "" {
			dir, err := StateDir(os.Environ())
			if err != nil {
				return err
			}
			opts.StateDir = dir
		}
		key, err := Key(opts.StateDir)
		if err != nil {
			return err
		}
		cfg.Secrets.Key = key
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(opts.RedisAddr); err != nil {
		return fmt.Errorf("start embedded redis on %s: %w", opts.RedisAddr, err)
	}
	defer mr.Close()
	// miniredis only expires keys when told time has passed.
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	go func() {
		for range ticker.C {
			mr.FastForward(time.Second)
		}
	}()
	redisURL := "redis://" + mr.Addr() + "/0"
	cfg.Redis.URL = redisURL
	cfg.Database.AutoMigrate = true
	// Trying Homing on a laptop means receivers on localhost.
	cfg.Delivery.AllowPrivateNetworks = true
	if opts.Fast {
		cfg.Retry.Schedule = []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}
		cfg.Sweeper.Interval = time.Second
	}
	a, err := app.Open(ctx, cfg, log, app.Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	var extra []process.Named
	if opts.Extra != nil {
		if extra, err = opts.Extra(a); err != nil {
			return err
		}
	}
	r, err := process.Dev(a, extra...)
	if err != nil {
		return err
	}
	return r.Run(ctx, func() {
		for _, e := range extra {
			if e.Banner != nil {
				fmt.Fprint(opts.Out, e.Banner())
			}
		}
		fmt.Fprintf(opts.Out, `
  Homing dev mode
  ===============
  embedded Redis : %s
  other shells   : %s
  database       : %s
  retry schedule : %v, sweep every %s

  WARNING: the embedded Redis keeps queued tasks IN MEMORY ONLY.
           Stopping this process loses every task not yet run.
           Use a real Redis (make run) for anything that matters.

`, mr.Addr(), OtherShells(cfg), cfg.Database.URL, cfg.Retry.Schedule, cfg.Sweeper.Interval)
		if opts.OnReady != nil {
			opts.OnReady(redisURL)
		}
	})
}

// OtherShells is the export line another shell runs to use this dev
// instance with homing, enqueue, worker or the client: the embedded Redis,
// the database (the per-user default is otherwise resolved again there) and
// the private-network allowance dev mode turns on, and the secrets.key (a
// webhook created from another shell with --secret is sealed with it). cfg
// is the configuration as dev mode runs it.
func OtherShells(cfg config.Config) string {
	vars := []string{
		"HOMING_REDIS_URL=" + shellQuote(cfg.Redis.URL),
		"HOMING_DATABASE_URL=" + shellQuote(cfg.Database.URL),
		"HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true",
	}
	if cfg.Secrets.Key != "" {
		vars = append(vars, "HOMING_SECRETS_KEY="+shellQuote(cfg.Secrets.Key))
	}
	return "export " + strings.Join(vars, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// URL characters.
func shellQuote(s string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/:.-_@%+=,", r)
	}
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !plain(r) }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
