// Package cli implements Homing's command-line tools: the homing admin
// command, enqueue, worker and scheduler. Each entry point builds a fresh
// command tree around its own streams and configuration, so nothing is shared
// between calls and tests can run them in parallel in one process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/lib/logging"
	"github.com/homingdev/homing/internal/wiring/app"
)

// env is what one invocation runs with: its streams, its raw arguments and
// its configuration, loaded once on first use.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// args are the arguments as given, before cobra takes the flags out; a
	// bare --secret needs them to find its value (see takeBareSecret).
	args []string

	configPath string
	cfg        *config.Config
	// tenantFlag is --tenant as given (HOMING_TENANT when not given), and
	// tenant the tenant withApp resolved from it: the one a command acts
	// in, passed to every service it calls.
	tenantFlag string
	tenant     string
	// devMonitorAddr is where `homing dev` and `homing run` serve the
	// asynqmon UI.
	devMonitorAddr string
	// devAPIAddr is where `homing dev` and `homing run` serve the HTTP API,
	// and devAPISetting the flag or key that sets it, for errors.
	devAPIAddr    string
	devAPISetting string
}

// config loads the configuration named by --config (and the HOMING_*
// environment) the first time a command needs it.
func (e *env) config() (config.Config, error) {
	if e.cfg == nil {
		cfg, err := config.Load(e.configPath)
		if err != nil {
			return config.Config{}, err
		}
		e.cfg = &cfg
	}
	return *e.cfg, nil
}

// configured is config and logger, for the commands that run services.
func (e *env) configured() (config.Config, *slog.Logger, error) {
	cfg, err := e.config()
	if err != nil {
		return cfg, nil, err
	}
	log, err := e.logger(cfg)
	return cfg, log, err
}

// logger is the configured logger for the long-running commands.
func (e *env) logger(cfg config.Config) (*slog.Logger, error) {
	return logging.New(e.stderr, cfg.Log.Level, cfg.Log.Format)
}

// quietLogger is the logger of one-shot commands: what they did is their
// output, so informational log lines would only clutter stderr; warnings and
// errors still show, and log.level debug still shows everything.
func (e *env) quietLogger(cfg config.Config) (*slog.Logger, error) {
	level := cfg.Log.Level
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err == nil && lvl > slog.LevelDebug && lvl < slog.LevelWarn {
		level = "warn"
	}
	return logging.New(e.stderr, level, cfg.Log.Format)
}

// openApp opens the database (migrating it when database.auto_migrate is
// set) for a one-shot command, and resolves the tenant it acts in
// (e.tenant).
func (e *env) openApp(ctx context.Context, cfg config.Config) (*app.App, error) {
	log, err := e.quietLogger(cfg)
	if err != nil {
		return nil, err
	}
	// A one-shot command says what failed itself (stats lists an
	// unreachable Redis among its problems): go-redis's own dial lines go
	// to debug.
	routeRedisLogs(log, slog.LevelDebug)
	a, err := app.Open(ctx, cfg, log, app.Options{})
	if err != nil {
		return nil, err
	}
	if e.tenant, err = e.resolveTenant(ctx, a); err != nil {
		_ = a.Close()
		return nil, err
	}
	return a, nil
}

// withApp loads the configuration, opens the App for a one-shot command, runs
// fn on it and closes it.
func (e *env) withApp(ctx context.Context, fn func(a *app.App) error) error {
	cfg, err := e.config()
	if err != nil {
		return err
	}
	a, err := e.openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	return fn(a)
}

// resolveTenant is the tenant the command acts in: --tenant, else
// HOMING_TENANT, else the default tenant. A named tenant must exist.
func (e *env) resolveTenant(ctx context.Context, a *app.App) (string, error) {
	name := e.tenantFlag
	if name == "" {
		name = os.Getenv("HOMING_TENANT")
	}
	if name == "" || name == tenant.Default {
		return tenant.Default, nil
	}
	if _, err := tenant.New(a.DB, a.Clock, a.Log).Get(ctx, name); err != nil {
		return "", fmt.Errorf("--tenant: %w", err)
	}
	return name, nil
}

// Homing runs the admin command with args (without the program name) and
// returns its exit status: 0 success, 1 failure, 2 bad usage.
func Homing(args []string, stdout, stderr io.Writer) int {
	e := newEnv(args, stdout, stderr)
	return execute(newHomingCmd(e), e)
}

// HomingIO is Homing with stdin given (--secret - reads the secret there).
func HomingIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := newEnv(args, stdout, stderr)
	e.stdin = stdin
	return execute(newHomingCmd(e), e)
}

// Enqueue runs the enqueue command.
func Enqueue(args []string, stdout, stderr io.Writer) int {
	e := newEnv(args, stdout, stderr)
	return execute(newEnqueueCmd(e), e)
}

// Worker runs the worker until SIGINT or SIGTERM.
func Worker(args []string, stdout, stderr io.Writer) int {
	e := newEnv(args, stdout, stderr)
	return execute(newWorkerCmd(e), e)
}

// Scheduler runs the scheduler until SIGINT or SIGTERM.
func Scheduler(args []string, stdout, stderr io.Writer) int {
	e := newEnv(args, stdout, stderr)
	return execute(newSchedulerCmd(e), e)
}

func newEnv(args []string, stdout, stderr io.Writer) *env {
	return &env{stdin: os.Stdin, stdout: stdout, stderr: stderr, args: args}
}

func newHomingCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "homing",
		Short: "Administer Homing webhooks and deliveries",
		Long: "homing manages webhooks, inspects deliveries, migrates the database and runs\n" +
			"the worker and scheduler. Configuration comes from --config FILE and HOMING_* variables.",
	}
	group(root)
	root.AddCommand(
		newMigrateCmd(e),
		newWebhookCmd(e),
		newDeliveryCmd(e),
		newSecretsCmd(e),
		newWorkerCmd(e),
		newSchedulerCmd(e),
		newStatsCmd(e),
		newDevCmd(e),
		newRunCmd(e),
		newMonitorCmd(e),
		newTokenCmd(e),
		newTenantCmd(e),
		newServeCmd(e),
	)
	return root
}

// execute runs root on e's arguments and reports an error in one line on
// stderr, prefixed with the program's name.
func execute(root *cobra.Command, e *env) int {
	root.PersistentFlags().StringVar(&e.configPath, "config", "", "configuration `FILE` (YAML); HOMING_* variables override it")
	root.PersistentFlags().StringVar(&e.tenantFlag, "tenant", "", "the `TENANT` to act in (default: HOMING_TENANT, else default)")
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetArgs(e.args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(context.Background())
	code := exitCode(err)
	if err == nil {
		return code
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.silent {
		return code
	}
	msg := oneLine(err.Error())
	if code == exitUsage && cmd != nil {
		msg += fmt.Sprintf(" (see %s --help)", cmd.CommandPath())
	}
	fmt.Fprintf(e.stderr, "%s: %s\n", root.Name(), msg)
	return code
}

// group makes cmd a command that only holds subcommands: run alone or with
// an unknown subcommand it is bad usage, not a help page with status 0.
func group(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		if len(args) == 0 {
			return usagef("missing command: use one of %s", strings.Join(names, ", "))
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(": did you mean %s?", strings.Join(s, " or "))
		} else {
			msg += fmt.Sprintf(": use one of %s", strings.Join(names, ", "))
		}
		return usagef("%s", msg)
	}
}

// run marks the errors of a command's work as failures (exit status 1);
// usage errors it returns keep status 2.
func run(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return failure(fn(cmd, args))
	}
}

// argNames checks the positional arguments against their names, saying which
// one is missing or unexpected.
func argNames(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		switch {
		case len(got) < len(names):
			return usagef("missing %s", names[len(got)])
		case len(got) > len(names):
			return usagef("unexpected argument %q", got[len(names)])
		}
		return nil
	}
}

// sqliteFile is the start line's attribute naming the SQLite file in use
// (the default is per user, config.DefaultSQLitePath, so say which), or
// nothing for PostgreSQL.
func sqliteFile(cfg config.Config) []any {
	path, ok := strings.CutPrefix(cfg.Database.URL, "sqlite://")
	if !ok {
		return nil
	}
	path, _, _ = strings.Cut(path, "?")
	return []any{"sqlite_file", path}
}
