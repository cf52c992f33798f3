// Command homing is Homing's admin command: webhooks, deliveries, migrations,
// secrets, and the worker and scheduler as subcommands. See package cli.
package main

import (
	"os"

	"github.com/homingdev/homing/internal/wiring/cli"
)

func main() {
	cli.LimitMemory(os.Args[1:], os.Environ())
	os.Exit(cli.Homing(os.Args[1:], os.Stdout, os.Stderr))
}
