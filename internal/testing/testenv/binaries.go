package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinariesEnv names a directory holding Homing's commands (homing, worker,
// scheduler, enqueue) built once for every package's tests: `make test`
// builds them there with -race, and a plain build of the same commands in
// its PlainSubdir, and sets it, so that tests/ and deploy/ do not each
// build their own.
const BinariesEnv = "HOMING_TEST_BIN"

// PlainSubdir is the directory, inside BinariesEnv's, of the commands built
// without -race.
const PlainSubdir = "plain"

// Binaries is the directory of Homing's commands for the tests, built with
// -race when race is set: BinariesEnv's (its PlainSubdir for a plain build)
// when set, else dir, into which they are built now. The second result
// reports whether dir was used.
func Binaries(dir string, race bool) (string, bool, error) {
	if bin := os.Getenv(BinariesEnv); bin != "" {
		if !race {
			bin = filepath.Join(bin, PlainSubdir)
		}
		for _, name := range []string{"homing", "worker", "scheduler", "enqueue"} {
			if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
				return "", false, fmt.Errorf("%s=%s: %w (unset it, or build them there: go %s)", BinariesEnv, os.Getenv(BinariesEnv), err, strings.Join(buildArgs(bin, race), " "))
			}
		}
		return bin, false, nil
	}
	build := exec.Command("go", buildArgs(dir, race)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", false, fmt.Errorf("build the binaries: %w", err)
	}
	return dir, true, nil
}

// buildArgs are go's arguments that build the commands into dir.
func buildArgs(dir string, race bool) []string {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	return append(args, "github.com/homingdev/homing/cmd/...")
}
