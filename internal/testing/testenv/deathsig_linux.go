package testenv

import "syscall"

// parentDeathSignal has the kernel kill a server the tests started when
// the test binary dies, even by SIGKILL or a go test timeout.
func parentDeathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
