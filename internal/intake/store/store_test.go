package store_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestOpenCreatesTheSQLiteDirectory: the per-user default database
// ($XDG_DATA_HOME/homing/homing.db) opens on a machine where Homing never
// ran, its directory made private to the user.
func TestOpenCreatesTheSQLiteDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "share", "homing", "homing.db")
	db, err := store.Open("sqlite://" + path)
	if err != nil {
		t.Fatalf("open a database whose directory is missing: %v", err)
	}
	defer func() { _ = store.Close(db) }()
	if err := db.Exec("CREATE TABLE t (x integer)").Error; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created: %v", err)
	}
	st, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory %s has mode %v, want 0700", filepath.Dir(path), st.Mode().Perm())
	}
}

// A PostgreSQL server without the database the URL names says how to make it.
func TestOpenSaysHowToCreateAMissingDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/homing_never_created"
	_, err = store.Open(u.String())
	if err == nil || !strings.Contains(err.Error(), "createdb homing_never_created") || !strings.Contains(err.Error(), `CREATE DATABASE "homing_never_created"`) {
		t.Fatalf("Open of a missing database: %v; want it to say createdb homing_never_created", err)
	}
}
