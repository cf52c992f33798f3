package cli_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/secretbox"
)

func TestSecretsGenkey(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	a, b := s.ok("secrets", "genkey").stdout, s.ok("secrets", "genkey").stdout
	if a == b {
		t.Error("two keys are equal")
	}
	key := strings.TrimSuffix(a, "\n")
	if raw, err := base64.StdEncoding.DecodeString(key); err != nil || len(raw) != 32 {
		t.Errorf("key %q is not the base64 of 32 bytes", key)
	}
	if _, err := secretbox.New(key); err != nil {
		t.Errorf("generated key is refused: %v", err)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	fresh := newSite(t, "")
	// Point a config at an empty file, with start-up migrations off.
	fresh.dsn = "sqlite://" + t.TempDir() + "/fresh.db"
	writeConfig(t, fresh.config, "database:\n  url: \""+fresh.dsn+"\"\n  auto_migrate: false\n")
	r := fresh.ok("migrate")
	if !strings.HasPrefix(r.stdout, "applied migration 1\n") {
		t.Errorf("first migrate: %q", r.stdout)
	}
	if r := fresh.ok("migrate"); r.stdout != "database is up to date\n" {
		t.Errorf("second migrate: %q", r.stdout)
	}
	fresh.ok(create("orders")...)
	if r := s.ok("migrate"); r.stdout != "database is up to date\n" {
		t.Errorf("migrate of a migrated database: %q", r.stdout)
	}
}
