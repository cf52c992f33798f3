// Command scheduler enqueues the periodic retry sweep until SIGINT or SIGTERM.
// See package cli.
package main

import (
	"os"

	"github.com/homingdev/homing/internal/wiring/cli"
)

func main() {
	cli.LimitMemory(os.Args[1:], os.Environ())
	os.Exit(cli.Scheduler(os.Args[1:], os.Stdout, os.Stderr))
}
