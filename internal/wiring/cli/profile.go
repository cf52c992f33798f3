package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// CPUProfileEnv names the file a long-running command (worker, scheduler,
// homing serve, homing dev) writes its CPU profile to, from start to a
// graceful stop: for the benchmark harness (internal/testing/bench -serve-cpuprofile),
// to see where a process's time goes. It is a test tool's variable
// (HOMING_TEST_*), so the start-up checks do not report it as a stray key.
const CPUProfileEnv = "HOMING_TEST_CPUPROFILE"

// startCPUProfile starts profiling into the file CPUProfileEnv names, if
// any, and returns what stops it and closes the file.
func startCPUProfile() (func(), error) {
	path := os.Getenv(CPUProfileEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CPUProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", CPUProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
