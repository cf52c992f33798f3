package devmode_test

import (
	"os/exec"
	"testing"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/devmode"
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
	line := devmode.OtherShells(cfg)
	out, err := exec.Command(sh, "-c", line+` && printf '%s|%s|%s' "$HOMING_REDIS_URL" "$HOMING_DATABASE_URL" "$HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS"`).CombinedOutput()
	if err != nil {
		t.Fatalf("sh ran %q: %v: %s", line, err, out)
	}
	if want := cfg.Redis.URL + "|" + cfg.Database.URL + "|true"; string(out) != want {
		t.Errorf("after %q the shell has\n%s\nwant\n%s", line, out, want)
	}
}
