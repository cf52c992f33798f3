package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/wiring/cli"
)

// okWarning runs the admin command and fails the test unless it exits 0
// with one warning line on stderr that mentions want.
func (s *site) okWarning(want string, args ...string) result {
	s.t.Helper()
	r := s.homing(args...)
	if r.code != 0 || !strings.HasPrefix(r.stderr, "warning: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		s.t.Fatalf("homing %s: want exit 0 and one warning mentioning %q, got %s", strings.Join(args, " "), want, r)
	}
	return r
}

// homingStdin runs the admin command with stdin.
func (s *site) homingStdin(stdin string, args ...string) result {
	s.t.Helper()
	var out, errb bytes.Buffer
	code := cli.HomingIO(append(slices.Clone(args), "--config", s.config), strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestSecretFromFileOrStdin: --secret-file PATH and --secret - take the
// secret from a file or stdin, never from the command line; the webhook
// then signs with exactly that secret (the trailing newline dropped).
func TestSecretFromFileOrStdin(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("a-secret-from-a-file-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ok("webhook", "create", "--name", "from-file", "--doctype", "Note", "--event", "on_update",
		"--url", "https://erp.example.com/a", "--secret-file", path)
	if got := s.storedSecret("from-file"); got != "a-secret-from-a-file-123" {
		t.Errorf("--secret-file stored %q", got)
	}
	r := s.homingStdin("a-secret-from-stdin-4567\r\n", "webhook", "create", "--name", "from-stdin", "--doctype", "Note", "--event", "on_update",
		"--url", "https://erp.example.com/b", "--secret", "-")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("--secret -: %s", r)
	}
	if got := s.storedSecret("from-stdin"); got != "a-secret-from-stdin-4567" {
		t.Errorf("--secret - stored %q", got)
	}
	r = s.homingStdin("rotated-from-stdin-89012\n", "webhook", "update", "from-file", "--secret=-")
	if r.code != 0 {
		t.Fatalf("update --secret=-: %s", r)
	}
	if got := s.storedSecret("from-file"); got != "rotated-from-stdin-89012" {
		t.Errorf("update --secret=- stored %q", got)
	}
	s.fails(2, []string{"webhook", "create", "--name", "both", "--doctype", "Note", "--event", "on_update",
		"--url", "https://erp.example.com/c", "--secret", "x-secret-on-the-line-1", "--secret-file", path}, "--secret or --secret-file")
	s.fails(1, []string{"webhook", "create", "--name", "missing", "--doctype", "Note", "--event", "on_update",
		"--url", "https://erp.example.com/d", "--secret-file", path + ".nope"}, "--secret-file", "no such file")
}

// TestEnqueueRefusesTextPostgreSQLCannotStore: NUL and invalid UTF-8 are
// refused by enqueue before anything is queued, naming what to fix.
func TestEnqueueRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	r := s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc-name", "SO-\xff", "--doc", `{"name": "SO-1"}`)
	checkError(t, r, 1, "enqueue: ", "doc_name", "UTF-8")
	r = s.enqueue("--doctype", "Sales\xc3\x28Order", "--event", "on_submit", "--doc", `{"name": "SO-1"}`)
	checkError(t, r, 1, "enqueue: ", "doc_type", "UTF-8")
	r = s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc", `{"name": "SO\u0000-1"}`)
	checkError(t, r, 2, "enqueue: ", "--doc", "NUL")
	r = s.enqueue("--doctype", "Sales Order", "--event", "on_submit", "--doc", "{\"name\": \"\xfe\"}")
	checkError(t, r, 2, "enqueue: ", "--doc", "UTF-8")
}
