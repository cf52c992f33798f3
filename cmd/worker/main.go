// Command worker delivers webhooks (fan-out, first attempts, retries, sweeps)
// until SIGINT or SIGTERM. See package cli.
package main

import (
	"os"

	"github.com/homingdev/homing/internal/wiring/cli"
)

func main() {
	cli.LimitMemory(os.Args[1:], os.Environ())
	os.Exit(cli.Worker(os.Args[1:], os.Stdout, os.Stderr))
}
