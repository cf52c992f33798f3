package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// homing webhook import frappe: the corpus's export with its secrets, a dry
// run that stores nothing, the import, and a second import that reports
// updated; a usage error names the only source it knows.
func TestWebhookImportFrappe(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok("migrate")
	corpus := "../../engine/webhook/testdata/frappe"
	export := filepath.Join(corpus, "webhooks.json")
	secrets := filepath.Join(corpus, "secrets.json")

	r := s.ok("webhook", "import", "frappe", export, "--secrets", secrets, "--dry-run")
	for _, want := range []string{"so-submitted: would be imported", "secret-missing: would be imported, disabled", "needs a human: enable_security is on but no secret", "needs-database: would be not imported", "reads Frappe's database", "adapted: is_dynamic_url"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run: %q missing from\n%s", want, r.stdout)
		}
	}
	if list := s.ok("webhook", "list", "--json"); strings.TrimSpace(list.stdout) != "[]" {
		t.Fatalf("a dry run stored webhooks: %s", list.stdout)
	}
	var records []any
	if b, err := os.ReadFile(export); err != nil || json.Unmarshal(b, &records) != nil {
		t.Fatalf("read %s: %v", export, err)
	}
	r = s.ok("webhook", "import", "frappe", export, "--secrets", secrets, "--json")
	rep := object(t, r.stdout)
	items, _ := rep["webhooks"].([]any)
	if len(items) != len(records) || rep["dry_run"] != false {
		t.Fatalf("import --json: %s", r.stdout)
	}
	show := object(t, s.ok("webhook", "show", "invoice-dynamic", "--json").stdout)
	if show["compat"] != "frappe" || show["condition_language"] != "python" || show["follow_redirects"] != float64(10) ||
		!strings.Contains(show["url_template"].(string), "{{ doc.name }}") || show["method"] != "PUT" || show["queue"] != "long" || show["timeout"] != "20s" || show["has_secret"] != true {
		t.Errorf("imported invoice-dynamic: %v", show)
	}
	r = s.ok("webhook", "import", "frappe", export)
	if !strings.Contains(r.stdout, "so-submitted: updated") {
		t.Errorf("second import:\n%s", r.stdout)
	}
	s.fails(2, []string{"webhook", "import", "zapier", export}, "frappe")
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`"nope"`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.fails(2, []string{"webhook", "import", "frappe", bad}, "export-fixtures")
}
