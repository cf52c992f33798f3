package testenv

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/intake/store"
)

// Main runs a package's tests and then drops the template database this
// test binary made and stops the Redis it started, so that a run leaves
// nothing behind. Use it in every package whose tests open PostgreSQL or
// Redis:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// A binary that was killed (or a package without Main) leaves its template
// and test databases; the next binary to make a template drops them
// (dropLeftovers).
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain that has more to do: it runs the tests, drops
// the template, stops the tests' own Redis and returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if err := dropTemplate(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
	}
	StopRedis()
	return code
}

// dropTemplate drops this process's template database, if it made one.
func dropTemplate() error {
	if templateName == "" {
		return nil
	}
	admin, err := store.Open(PostgresURL())
	if err != nil {
		return fmt.Errorf("drop template %s: %w", templateName, err)
	}
	defer func() { _ = store.Close(admin) }()
	if err := admin.Exec("DROP DATABASE IF EXISTS " + templateName + " WITH (FORCE)").Error; err != nil {
		return fmt.Errorf("drop template %s: %w", templateName, err)
	}
	return nil
}

// ownedName matches the databases testenv makes: homing_tmpl_<pid>_<hex>
// (a binary's template) and homing_t_<pid>_<hex> (one test's database).
var ownedName = regexp.MustCompile(`^homing_(?:tmpl|t)_(\d+)_[0-9a-f]+$`)

// dropLeftovers drops the databases of test binaries that are no longer
// running: those of a killed run, and templates of packages without Main.
// A database whose process still runs is left alone (a package running in
// parallel, or another run on the same server). The check by process ID
// assumes the test binaries run on the machine they name, as they do: the
// tests talk to a PostgreSQL on loopback.
func dropLeftovers(admin *gorm.DB) error {
	var names []string
	if err := admin.Raw("SELECT datname FROM pg_database WHERE datname LIKE 'homing\\_t%'").Scan(&names).Error; err != nil {
		return fmt.Errorf("list leftover test databases: %w", err)
	}
	for _, name := range names {
		m := ownedName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || running(pid) {
			continue
		}
		// Another binary starting now may be dropping the same leftover;
		// whichever loses the race has nothing left to do.
		if err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error; err != nil {
			fmt.Fprintf(os.Stderr, "testenv: drop leftover test database %s: %v\n", name, err)
		}
	}
	return nil
}

// running reports whether process pid exists (signal 0 checks without
// sending anything; EPERM means it exists but is not ours).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
