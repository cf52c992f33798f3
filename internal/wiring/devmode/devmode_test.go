package devmode_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/wiring/devmode"
)

// TestOtherShellsExportsWhatAnotherShellNeeds runs the banner's export line
// in a real shell and reads each variable back: a path with spaces or quotes
// survives, and the database is there (without it another shell's homing
// would resolve its own default).
func TestOtherShellsExportsWhatAnotherShellNeeds(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run the export line in")
	}
	cfg := config.Default()
	cfg.Redis.URL = "redis://127.0.0.1:40123/0"
	cfg.Database.URL = "sqlite:///home/o'brien/My Data/homing/homing.db"
	cfg.Secrets.Key = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq8M="
	cfg.Delivery.AllowPrivateNetworks = true // as dev mode runs
	line := devmode.OtherShells(cfg)
	out, err := exec.Command(sh, "-c", line+` && printf '%s|%s|%s|%s' "$HOMING_REDIS_URL" "$HOMING_DATABASE_URL" "$HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS" "$HOMING_SECRETS_KEY"`).CombinedOutput()
	if err != nil {
		t.Fatalf("sh ran %q: %v: %s", line, err, out)
	}
	if want := cfg.Redis.URL + "|" + cfg.Database.URL + "|true|" + cfg.Secrets.Key; string(out) != want {
		t.Errorf("after %q the shell has\n%s\nwant\n%s", line, out, want)
	}
}

// TestKeyIsMadeOnceAndKept: the first dev run makes a secrets.key in the
// state directory, readable only by its owner; later runs, and runs racing
// the first, get the same key, so the dev database's secrets stay openable.
func TestKeyIsMadeOnceAndKept(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir, err := devmode.StateDir([]string{"HOME=/nonexistent", "XDG_STATE_HOME=" + state})
	if err != nil || dir != filepath.Join(state, "homing") {
		t.Fatalf("StateDir = %q, %v; want XDG_STATE_HOME/homing", dir, err)
	}
	if d, _ := devmode.StateDir([]string{"HOME=/home/ann", "XDG_STATE_HOME=relative"}); d != "/home/ann/.local/state/homing" {
		t.Errorf("StateDir with a relative XDG_STATE_HOME = %q, want ~/.local/state/homing", d)
	}
	keys := make([]string, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			var err error
			if keys[i], err = devmode.Key(dir); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := secretbox.New(keys[0]); err != nil {
		t.Fatalf("dev key %q: %v", keys[0], err)
	}
	again, err := devmode.Key(dir)
	if err != nil || again != keys[0] || keys[1] != keys[0] || keys[2] != keys[0] || keys[3] != keys[0] {
		t.Fatalf("keys %q then %q, %v; want one key throughout", keys, again, err)
	}
	fi, err := os.Stat(filepath.Join(dir, devmode.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("state directory holds %d files, want only the key", len(entries))
	}
}

// TestLoopback: an address without a host (Homing's defaults, which listen
// on every interface) becomes a loopback one; a host given is kept.
func TestLoopback(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		":8088":          "127.0.0.1:8088",
		":0":             "127.0.0.1:0",
		"":               "",
		"127.0.0.1:9464": "127.0.0.1:9464",
		"0.0.0.0:9464":   "0.0.0.0:9464",
		"[::1]:8088":     "[::1]:8088",
	} {
		if got := devmode.Loopback(in); got != want {
			t.Errorf("Loopback(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOtherShellsAllowsPrivateNetworksOnlyWhenTheRunDoes: make run keeps
// the SSRF guard unless told; its export line must not open it.
func TestOtherShellsAllowsPrivateNetworksOnlyWhenTheRunDoes(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	if line := devmode.OtherShells(cfg); strings.Contains(line, "ALLOW_PRIVATE") {
		t.Errorf("export line %q allows private networks the run refuses", line)
	}
}
