// Package devmode runs all of Homing in one process on a laptop: homing dev
// with nothing installed (an embedded Redis, miniredis, on a loopback port
// other shells can reach), and homing run (make run) on a real Redis. Both
// use the SQLite default database unless told otherwise, keep a dev
// secrets.key and the console's admin token in the state directory, and
// serve only the loopback interface unless an address names another host.
package devmode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/process"
)

// FastSchedule is the compressed schedule of --fast: the whole retry story in
// seconds instead of hours.
const FastSchedule = "5s,10s,20s"

// Options configures a dev run.
type Options struct {
	// RealRedis runs on the Redis cfg names (homing run, make run) instead
	// of an embedded one: its queued tasks survive a restart, and
	// delivery.allow_private_networks stays as configured.
	RealRedis bool
	// RedisAddr is where the embedded Redis listens (127.0.0.1:0 picks a port).
	RedisAddr string
	// Fast compresses the retry schedule and the sweep interval.
	Fast bool
	// Out receives the banner.
	Out io.Writer
	// OnReady, when set, is called with the Redis URL once every part is
	// running (tests use it instead of parsing the banner).
	OnReady func(redisURL string)
	// Started, when set, is called with the App once every part is
	// running, after the banner (the command logs its start-up checks
	// there, as homing worker does).
	Started func(a *app.App)
	// Stopping, when set, is called once ctx ends, before the parts stop
	// (the command un-registers its signal handler there, so that a second
	// Ctrl-C ends the process at once).
	Stopping func()
	// StateDir is where the dev secrets.key (see Key) and the console's
	// admin token (see AdminToken) are kept; empty means
	// StateDir(os.Environ()).
	StateDir string
	// AdminToken makes (or finds again) the console's admin token and
	// prints it in the banner: set when the HTTP API runs.
	AdminToken bool
	// Extra, when set, gives more parts (the HTTP API, the monitor UI) to
	// run on the same Redis and database, started after the core and
	// stopped before it.
	Extra func(a *app.App) ([]process.Named, error)
}

// stateDir is opts.StateDir, resolved on first use.
func (o *Options) stateDir() (string, error) {
	if o.StateDir == "" {
		dir, err := StateDir(os.Environ())
		if err != nil {
			return "", err
		}
		o.StateDir = dir
	}
	return o.StateDir, nil
}

// Run starts everything and blocks until ctx is done, then stops it all.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) error {
	if opts.RedisAddr == "" {
		opts.RedisAddr = "127.0.0.1:0"
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	keyFrom := "from the configuration (secrets.key, HOMING_SECRETS_KEY)"
	if cfg.Secrets.Key == "" {
		// Without a key, the first webhook made with --secret would stall.
		dir, err := opts.stateDir()
		if err != nil {
			return err
		}
		key, err := Key(dir)
		if err != nil {
			return err
		}
		cfg.Secrets.Key = key
		keyFrom = filepath.Join(dir, KeyFile)
	}
	if !opts.RealRedis {
		url, stop, err := embedRedis(opts.RedisAddr)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Redis.URL = url
		// Trying Homing on a laptop means receivers on localhost.
		cfg.Delivery.AllowPrivateNetworks = true
	}
	cfg.Database.AutoMigrate = true
	cfg.Metrics.Addr = Loopback(cfg.Metrics.Addr)
	if opts.Fast {
		cfg.Retry.Schedule = []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}
		cfg.Sweeper.Interval = time.Second
	}
	a, err := app.Open(ctx, cfg, log, app.Options{Process: "dev"})
	if err != nil {
		return err
	}
	defer a.Close()
	var adminToken string
	if opts.AdminToken {
		dir, err := opts.stateDir()
		if err != nil {
			return err
		}
		if adminToken, err = AdminToken(ctx, dir, token.New(a.DB, a.Clock, log)); err != nil {
			return err
		}
	}
	var extra []process.Named
	if opts.Extra != nil {
		if extra, err = opts.Extra(a); err != nil {
			return err
		}
	}
	r, w, err := process.Dev(a, extra...)
	if err != nil {
		return err
	}
	r.Stopping = opts.Stopping
	return r.Run(ctx, func() {
		b := banner{cfg: cfg, opts: opts, extra: extra, adminToken: adminToken, keyFrom: keyFrom, metricsAddr: w.MetricsAddr()}
		fmt.Fprint(opts.Out, b.String())
		if opts.Started != nil {
			opts.Started(a)
		}
		if opts.OnReady != nil {
			opts.OnReady(cfg.Redis.URL)
		}
	})
}

// embedRedis starts miniredis on addr and returns its URL and the function
// that stops it.
func embedRedis(addr string) (string, func(), error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(addr); err != nil {
		return "", nil, fmt.Errorf("start embedded redis on %s: %w", addr, err)
	}
	// miniredis only expires keys when told time has passed.
	ticker := time.NewTicker(time.Second)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				mr.FastForward(time.Second)
			}
		}
	}()
	return "redis://" + mr.Addr() + "/0", func() { ticker.Stop(); close(done); mr.Close() }, nil
}

// Loopback is addr on the loopback interface when it names no host
// (":9464" listens on every interface; Homing's defaults are loopback
// already), so that a run on a laptop serves that laptop only. An address with a host
// ("0.0.0.0:9464" included) is kept as given, and "" (disabled) stays "".
func Loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// banner is what a run prints once every part runs: where to point a
// browser, the token to sign in with, and what another shell needs.
type banner struct {
	cfg         config.Config
	opts        Options
	extra       []process.Named
	adminToken  string
	keyFrom     string
	metricsAddr string
}

func (b banner) String() string {
	var s strings.Builder
	title := "Homing (make run: homing run)"
	if !b.opts.RealRedis {
		title = "Homing dev mode"
	}
	fmt.Fprintf(&s, "\n  %s\n  %s\n", title, strings.Repeat("=", len(title)))
	for _, e := range b.extra {
		if e.Banner != nil {
			s.WriteString(e.Banner())
		}
	}
	if b.adminToken != "" {
		fmt.Fprintf(&s, "  admin token    : %s\n", b.adminToken)
		fmt.Fprintf(&s, "                   (sign in to the console with it, or send it as Authorization: Bearer; kept in %s)\n",
			filepath.Join(b.opts.StateDir, TokenFile))
	}
	if b.metricsAddr != "" {
		fmt.Fprintf(&s, "  metrics        : http://%s/metrics\n", b.metricsAddr)
	}
	redis := "embedded Redis : " + strings.TrimSuffix(strings.TrimPrefix(b.cfg.Redis.URL, "redis://"), "/0")
	if b.opts.RealRedis {
		redis = "Redis          : " + b.cfg.Redis.URL
	}
	fmt.Fprintf(&s, "  %s\n", redis)
	fmt.Fprintf(&s, "  database       : %s\n", b.cfg.Database.URL)
	fmt.Fprintf(&s, "  secrets.key    : %s\n", b.keyFrom)
	fmt.Fprintf(&s, "  other shells   : %s\n", OtherShells(b.cfg))
	fmt.Fprintf(&s, "  retry schedule : %v, sweep every %s\n\n", b.cfg.Retry.Schedule, b.cfg.Sweeper.Interval)
	if !b.opts.RealRedis {
		s.WriteString(`  WARNING: the embedded Redis keeps queued tasks IN MEMORY ONLY.
           Stopping this process loses every task not yet run.
           Use a real Redis (make run) for anything that matters.

`)
	} else if !b.cfg.Delivery.AllowPrivateNetworks {
		s.WriteString(`  Webhooks to a receiver on this machine or a private network (127.0.0.1, 10.x,
  192.168.x) are refused; HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true make run allows them.

`)
	}
	return s.String()
}

// OtherShells is the export line another shell runs to use this dev
// instance with homing, enqueue, worker or the client: the Redis, the
// database (the per-user default is otherwise resolved again there), the
// private-network allowance when on (dev mode turns it on), and the
// secrets.key (a webhook created from another shell with --secret is
// sealed with it). cfg is the configuration as the run has it.
func OtherShells(cfg config.Config) string {
	vars := []string{
		"HOMING_REDIS_URL=" + shellQuote(cfg.Redis.URL),
		"HOMING_DATABASE_URL=" + shellQuote(cfg.Database.URL),
	}
	if cfg.Delivery.AllowPrivateNetworks {
		vars = append(vars, "HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true")
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
