// Command enqueue publishes one document event to Homing and prints its
// event ID. See package cli.
package main

import (
	"os"

	"github.com/homingdev/homing/internal/wiring/cli"
)

func main() {
	cli.LimitMemory(os.Args[1:], os.Environ())
	os.Exit(cli.Enqueue(os.Args[1:], os.Stdout, os.Stderr))
}
