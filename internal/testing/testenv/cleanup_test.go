package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/homingdev/homing/internal/intake/store"
)

// TestLeftoversOfDeadProcessesAreDropped: the databases a killed test
// binary left are dropped when the next binary makes its template; those of
// a binary still running are kept.
func TestLeftoversOfDeadProcessesAreDropped(t *testing.T) {
	admin, err := store.Open(PostgresURL())
	if err != nil {
		t.Skipf("PostgreSQL is required: %v", err)
	}
	t.Cleanup(func() { _ = store.Close(admin) }) // after the drops below
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := gone.Process.Pid // exited and reaped: no process has this ID now
	if running(dead) {
		t.Skipf("process ID %d was reused already", dead)
	}
	deadTmpl := fmt.Sprintf("homing_tmpl_%d_%s", dead, randomSuffix())
	deadTest := fmt.Sprintf("homing_t_%d_%s", dead, randomSuffix())
	live := fmt.Sprintf("homing_t_%d_%s", os.Getpid(), randomSuffix())
	other := "homing_tother_" + randomSuffix() // not one of testenv's names
	for _, name := range []string{deadTmpl, deadTest, live, other} {
		if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error })
	}
	if err := dropLeftovers(admin); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		var n int64
		if err := admin.Raw("SELECT count(*) FROM pg_database WHERE datname = ?", name).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	for name, want := range map[string]bool{deadTmpl: false, deadTest: false, live: true, other: true} {
		if got := exists(name); got != want {
			t.Errorf("database %s exists = %v, want %v", name, got, want)
		}
	}
}

// TestTemplateIsDroppedAtTheEnd: a binary's template is gone once Run returns.
func TestTemplateIsDroppedAtTheEnd(t *testing.T) {
	if os.Getenv("HOMING_TESTENV_CHILD") == "1" {
		_ = PostgresDSN(t) // makes the template
		return
	}
	admin, err := store.Open(PostgresURL())
	if err != nil {
		t.Skipf("PostgreSQL is required: %v", err)
	}
	defer func() { _ = store.Close(admin) }()
	// Run this test again in a child binary, under testenv.Main, and look
	// for its template afterwards.
	cmd := exec.Command(os.Args[0], "-test.run=^TestTemplateIsDroppedAtTheEnd$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOMING_TESTENV_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var n int64
	pattern := fmt.Sprintf("homing\\_tmpl\\_%d\\_%%", cmd.Process.Pid)
	if err := admin.Raw("SELECT count(*) FROM pg_database WHERE datname LIKE ?", pattern).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the child's template database (%s) is still there", pattern)
	}
}

func TestMain(m *testing.M) { Main(m) }
