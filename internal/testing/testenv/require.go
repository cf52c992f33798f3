package testenv

import (
	"os"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true, as CI services set
// it), where every test must run: none may pass by skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require ends a test that cannot run here because what is missing was not
// installed: skipped on a developer's machine, failed in CI (InCI), where
// scripts/services.sh installs it. missing says what, and how to install
// it.
func Require(t testing.TB, missing string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s; in CI every test must run, so this one fails instead of skipping", missing)
	}
	t.Skipf("%s; skipped (with CI=true it would fail)", missing)
}
