package cli

import (
	"runtime/debug"
	"strings"

	"github.com/homingdev/homing/config"
)

// LimitMemory gives the process the Go runtime memory limit of
// process.memory_limit, read from the configuration the arguments name
// (--config) and the environment, unless GOMEMLIMIT is set (the runtime
// has read that one already, and it wins). Evaluations of definitions stop
// past 90% of the limit (delivery's heap ceiling), so every Homing process
// has a backstop whatever a definition says. The limit is the process's:
// only the commands' main functions call this, never tests that run
// commands inside their own process. A configuration that does not load
// sets nothing; the command then reports why.
func LimitMemory(args, environ []string) {
	if limit, ok := memoryLimit(args, environ); ok {
		debug.SetMemoryLimit(limit)
	}
}

// memoryLimit is the limit LimitMemory sets, and whether it sets one.
func memoryLimit(args, environ []string) (int64, bool) {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GOMEMLIMIT=") {
			return 0, false
		}
	}
	cfg, err := config.LoadFrom(configFlag(args), environ)
	if err != nil || cfg.Process.MemoryLimit <= 0 {
		return 0, false
	}
	return cfg.Process.MemoryLimit, true
}

// configFlag finds --config FILE (or --config=FILE) in args, before
// cobra has parsed them.
func configFlag(args []string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return ""
		case a == "--config" && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--config="):
			return strings.TrimPrefix(a, "--config=")
		}
	}
	return ""
}
