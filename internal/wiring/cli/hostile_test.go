package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileInputCorpus feeds bad input through every command-line entry
// point. Each must get a one-line error that says what was wrong (exit 1 or
// 2), never a panic, and must leave nothing half-written: the webhook list
// stays empty throughout.
func TestHostileInputCorpus(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok("migrate")
	base := func(extra ...string) []string {
		return append([]string{"webhook", "create", "--name", "bad", "--doctype", "Sales Order", "--event", "on_submit", "--url", "https://93.184.216.34/hook"}, extra...)
	}
	long := strings.Repeat("x", 300)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		// URLs
		{"ftp url", base("--url", "ftp://x/y"), 1, []string{"not http(s)"}},
		{"relative url", base("--url", "/hook"), 1, []string{"url"}},
		{"url without host", base("--url", "http:///x"), 1, []string{"no host"}},
		{"url with credentials", base("--url", "https://u:p@93.184.216.34/"), 1, []string{"credentials"}},
		{"url with control char", base("--url", "https://93.184.216.34/\x00"), 1, []string{"url"}},
		{"javascript url", base("--url", "javascript:alert(1)"), 1, []string{"url"}},
		// events and names
		{"unknown event", base("--event", "on_delete"), 1, []string{"on_delete", "after_insert"}},
		{"empty event", base("--event", ""), 1, []string{"event"}},
		{"name too long", base("--name", long), 1, []string{"name"}},
		{"name with newline", base("--name", "a\nb"), 1, []string{"name"}},
		{"doctype with control char", base("--doctype", "Sales\x07Order"), 1, []string{"doctype"}},
		{"missing url", []string{"webhook", "create", "--name", "n", "--doctype", "D", "--event", "on_update"}, 2, []string{"url"}},
		// methods, structures, numbers
		{"method GET", base("--method", "GET"), 1, []string{"method"}},
		{"method injection", base("--method", "POST\r\nX: y"), 1, []string{"method"}},
		{"structure xml", base("--structure", "xml"), 1, []string{"structure"}},
		{"negative retries", base("--max-retries", "-1"), 1, []string{"max-retries"}},
		{"huge retries", base("--max-retries", "1000000"), 1, []string{"max-retries"}},
		{"retries not a number", base("--max-retries", "many"), 2, []string{"max-retries"}},
		{"timeout too small", base("--timeout", "1ns"), 1, []string{"timeout"}},
		{"timeout too large", base("--timeout", "1h"), 1, []string{"timeout"}},
		{"timeout garbage", base("--timeout", "soon"), 2, []string{"timeout"}},
		{"queue with space", base("--queue", "a b"), 1, []string{"queue"}},
		{"signature scheme", base("--signature", "md5"), 1, []string{"signature"}},
		// headers
		{"header CRLF injection", base("--header", "X-A: b\r\nX-Evil: 1"), 1, []string{"header"}},
		{"header without colon", base("--header", "X-A"), 1, []string{"header"}},
		{"host override", base("--header", "Host: evil"), 1, []string{"Host"}},
		{"content-length override", base("--header", "Content-Length: 1"), 1, []string{"Content-Length"}},
		{"hop-by-hop header", base("--header", "Connection: close"), 1, []string{"Connection"}},
		{"bad header name", base("--header", "X A: b"), 1, []string{"header"}},
		// fields
		{"empty field", base("--field", "="), 1, []string{"field"}},
		{"field without name", base("--field", "=key"), 1, []string{"field"}},
		// templates
		{"template syntax", base("--template", `{"a": {{ doc.name }`), 1, []string{"template"}},
		{"template include", base("--template", `{% include "/etc/passwd" %}`), 1, []string{"template"}},
		{"template too big", base("--template", strings.Repeat("a", 70<<10)), 1, []string{"template"}},
		{"template missing file", base("--template", "@"+filepath.Join(t.TempDir(), "none.j2")), 1, []string{"none.j2"}},
		{"template with form", base("--structure", "form", "--template", `{"a": 1}`), 1, []string{"template"}},
		// conditions
		{"condition syntax", base("--condition", "doc.total >"), 1, []string{"condition"}},
		{"condition not bool", base("--condition", `"yes"`), 1, []string{"condition"}},
		// secrets
		{"secret with space", base("--secret", "a b c d e f g h i j k l m n o p"), 1, []string{"secret"}},
		{"whsec bad base64", base("--secret", "whsec_!!!"), 1, []string{"secret"}},
		// delivery commands
		{"bad status filter", []string{"delivery", "list", "--status", "Pending"}, 2, []string{"status"}},
		{"bad limit", []string{"delivery", "list", "--limit", "0"}, 2, []string{"limit"}},
		{"unknown delivery", []string{"delivery", "show", "nope"}, 1, []string{"nope"}},
		{"recover Delivered", []string{"delivery", "recover", "--webhook", "w", "--status", "Delivered"}, 2, []string{"status"}},
		{"recover without webhook", []string{"delivery", "recover"}, 2, []string{"webhook"}},
		{"unknown command", []string{"webhok", "list"}, 2, []string{"webhok"}},
	}
	for _, tt := range tests {
		r := s.homing(tt.args...)
		if r.code != tt.code {
			t.Errorf("%s: exit %d, want %d (%s)", tt.name, r.code, tt.code, r)
			continue
		}
		if strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: stderr is not one line: %q", tt.name, r.stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr %q does not mention %q", tt.name, r.stderr, w)
			}
		}
		if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("%s: panicked: %s", tt.name, r.stderr)
		}
	}
	if r := s.ok("webhook", "list", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("a refused webhook was half-written: %s", r.stdout)
	}
}

// TestHostileDocsAndConfig covers enqueue's --doc and the configuration.
func TestHostileDocsAndConfig(t *testing.T) {
	t.Parallel()
	s := newSite(t, "redis:\n  url: \"redis://127.0.0.1:1/0\"\n")
	docs := []struct {
		name string
		doc  string
		code int
		want string
	}{
		{"doc not json", `{"a":`, 2, "JSON"},
		{"doc an array", `[1,2]`, 2, "object"},
		{"doc a string", `"x"`, 2, "object"},
		{"doc two values", `{} {}`, 2, "JSON"},
		{"doc missing file", "@/nonexistent/doc.json", 1, "doc.json"},
	}
	for _, d := range docs {
		r := s.enqueue("--doctype", "D", "--event", "on_update", "--doc", d.doc)
		if r.code != d.code || !strings.Contains(r.stderr, d.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: %s", d.name, r)
		}
	}
	if r := s.enqueue("--doctype", "D", "--event", "bogus", "--doc", "{}"); r.code == 0 || !strings.Contains(r.stderr, "bogus") {
		t.Errorf("unknown event: %s", r)
	}
	if r := s.enqueue("--doctype", "D", "--event", "on_update", "--event-id", strings.Repeat("e", 500), "--doc", "{}"); r.code == 0 || !strings.Contains(r.stderr, "id") {
		t.Errorf("overlong event id: %s", r)
	}
	big := `{"x": "` + strings.Repeat("a", 2<<20) + `"}`
	if r := s.enqueue("--doctype", "D", "--event", "on_update", "--doc", big); r.code == 0 || !strings.Contains(r.stderr, "max_payload_bytes") {
		t.Errorf("oversized document: %s", r)
	}
	dir := t.TempDir()
	configs := []struct {
		name, yaml, want string
	}{
		{"typo key", "sweeper:\n  intervall: 1m\n", "sweeper.intervall"},
		{"bad duration", "retry:\n  schedule: [5x]\n", "retry.schedule"},
		{"bad yaml", "redis: [\n", "config"},
		{"bad cidr", "delivery:\n  allowed_networks: [10.0.0.0/33]\n", "delivery.allowed_networks"},
		{"bad redis url", "redis:\n  url: localhost\n", "redis.url"},
		{"negative batch", "sweeper:\n  batch_size: -5\n", "sweeper.batch_size"},
	}
	for i, c := range configs {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
		writeConfig(t, p, c.yaml)
		r := s.homingWith(p, "webhook", "list")
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("config %d %s: %s", i, c.name, r)
		}
	}
}
