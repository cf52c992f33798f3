package devmode_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/wiring/devmode"
)

// TestAdminTokenIsKeptAndNeverPilesUp: a second run prints the first
// run's token (the console stays signed in); a database that does not know
// the kept token (another database, or the token revoked) gets a new one
// in place of the old, never a second.
func TestAdminTokenIsKeptAndNeverPilesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "homing")
	tokens := token.New(testenv.SQLite(t), clock.Real{}, nil)
	first, err := devmode.AdminToken(ctx, dir, tokens)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.Authenticate(ctx, first)
	if err != nil || tok.Name != devmode.TokenName || tok.Scope != token.ScopeAdmin || !tok.Operator {
		t.Fatalf("the token opens %+v, %v; want an operator admin token named %s", tok, err, devmode.TokenName)
	}
	if fi, err := os.Stat(filepath.Join(dir, devmode.TokenFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", fi, err)
	}
	if again, err := devmode.AdminToken(ctx, dir, tokens); err != nil || again != first {
		t.Errorf("second run: %q, %v; want the first run's token", again, err)
	}

	// The token revoked: replaced, and the file follows.
	if err := tokens.Revoke(ctx, devmode.TokenName); err != nil {
		t.Fatal(err)
	}
	second, err := devmode.AdminToken(ctx, dir, tokens)
	if err != nil || second == first {
		t.Fatalf("after a revoke: %q, %v; want a new token", second, err)
	}
	if kept, _ := devmode.AdminToken(ctx, dir, tokens); kept != second {
		t.Errorf("the new token is not the one kept")
	}

	// Another database, then back: each holds one such token.
	other := token.New(testenv.SQLite(t), clock.Real{}, nil)
	if _, err := devmode.AdminToken(ctx, dir, other); err != nil {
		t.Fatal(err)
	}
	if _, err := devmode.AdminToken(ctx, dir, tokens); err != nil {
		t.Fatal(err)
	}
	list, err := tokens.List(ctx)
	if err != nil || len(list) != 1 {
		t.Errorf("tokens after runs on two databases: %+v, %v; want one", list, err)
	}
}
