//go:build !linux

package testenv

import "syscall"

// parentDeathSignal is Linux's alone; elsewhere a killed test binary can
// leave its Redis running until the machine restarts.
func parentDeathSignal() *syscall.SysProcAttr { return nil }
