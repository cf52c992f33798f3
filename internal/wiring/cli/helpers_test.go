package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/wiring/cli"
	"github.com/homingdev/homing/models"
)

// site is one test's private Homing: a migrated SQLite database and a config
// file naming it, so tests never touch the process environment and can run
// in parallel.
type site struct {
	t      *testing.T
	config string // path of the YAML file
	dsn    string
	key    string
	// redis is the test binary's own Redis the site uses (never one on
	// 6379, the user's).
	redis asynq.RedisClientOpt
}

// newSite writes a config file for a fresh database. extra is more YAML
// (other sections) appended to it.
func newSite(t *testing.T, extra string) *site {
	t.Helper()
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s := &site{t: t, dsn: testenv.SQLiteDSN(t), key: key}
	if !strings.Contains(extra, "redis:") {
		s.redis, _ = testenv.Redis(t)
		extra += fmt.Sprintf("redis:\n  url: %q\n", testenv.RedisURL(s.redis))
	}
	s.config = filepath.Join(t.TempDir(), "homing.yaml")
	if !strings.Contains(extra, "delivery:") {
		extra += "delivery:\n  allow_private_networks: true\n" // the receivers are on loopback
	}
	yaml := fmt.Sprintf("database:\n  url: %q\n  auto_migrate: false\nsecrets:\n  key: %q\nlog:\n  level: info\n%s", s.dsn, key, extra)
	writeConfig(t, s.config, yaml)
	return s
}

func writeConfig(t *testing.T, path, yaml string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// result is what one command invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// homing runs the admin command with --config appended.
func (s *site) homing(args ...string) result {
	s.t.Helper()
	var out, errb bytes.Buffer
	code := cli.Homing(append(slices.Clone(args), "--config", s.config), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// homingWith runs the admin command with another config file.
func (s *site) homingWith(config string, args ...string) result {
	s.t.Helper()
	var out, errb bytes.Buffer
	code := cli.Homing(append(slices.Clone(args), "--config", config), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs the admin command and fails the test unless it exits 0 with
// nothing on stderr.
func (s *site) ok(args ...string) result {
	s.t.Helper()
	r := s.homing(args...)
	if r.code != 0 || r.stderr != "" {
		s.t.Fatalf("homing %s: want exit 0 and empty stderr, got %s", strings.Join(args, " "), r)
	}
	return r
}

// fails runs the admin command and checks its exit status and that stderr
// is one line mentioning each of want.
func (s *site) fails(code int, args []string, want ...string) result {
	s.t.Helper()
	r := s.homing(args...)
	checkError(s.t, r, code, "homing: ", want...)
	return r
}

func checkError(t *testing.T, r result, code int, prefix string, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not exactly one line: %q", r.stderr)
	}
	if !strings.HasPrefix(r.stderr, prefix) {
		t.Errorf("stderr %q does not start with %q", r.stderr, prefix)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not mention %q", r.stderr, w)
		}
	}
}

// object decodes a JSON object printed by a command.
func object(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, s)
	}
	return m
}

// array decodes a JSON array of objects printed by a command.
func array(t *testing.T, s string) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, s)
	}
	if a == nil {
		t.Fatalf("output is null, want an array: %s", s)
	}
	return a
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func checkKeys(t *testing.T, what string, m map[string]any, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := keys(m); !slices.Equal(got, want) {
		t.Errorf("%s: JSON keys\n got %v\nwant %v", what, got, want)
	}
}

// storedWebhook is webhook name's row as the database holds it.
func (s *site) storedWebhook(name string) models.Webhook {
	s.t.Helper()
	db, err := store.Open(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	var w models.Webhook
	if err := db.Where("name = ?", name).Take(&w).Error; err != nil {
		s.t.Fatalf("read webhook %q: %v", name, err)
	}
	return w
}

// webhookID is the ID the database holds for webhook name.
func (s *site) webhookID(name string) string { return s.storedWebhook(name).ID }

// storedSecret opens the secret stored for webhook name.
func (s *site) storedSecret(name string) string {
	s.t.Helper()
	w := s.storedWebhook(name)
	box, err := secretbox.New(s.key)
	if err != nil {
		s.t.Fatal(err)
	}
	plain, err := box.Open(w.Secret)
	if err != nil {
		s.t.Fatalf("open secret of %q: %v", name, err)
	}
	return plain
}
