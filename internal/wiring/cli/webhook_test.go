package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// webhookKeys are the fields of `homing webhook show --json`, exactly.
var webhookKeys = []string{
	"name", "doctype", "event", "condition", "url", "method", "structure", "template",
	"fields", "headers", "has_secret", "signature", "enabled", "max_retries", "queue",
	"timeout", "rate_limit", "follow_redirects", "url_template", "compat", "condition_language", "description", "ordering", "created_at", "updated_at",
}

// create is the smallest valid create command line.
func create(name string, extra ...string) []string {
	return append([]string{"webhook", "create", "--name", name, "--doctype", "Sales Order",
		"--event", "on_submit", "--url", "https://example.com/hooks/" + name}, extra...)
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"missing command", "webhook"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{[]string{"webhok"}, []string{`did you mean webhook?`}},
		{[]string{"webhook"}, []string{"missing command", "create"}},
		{[]string{"webhook", "frob"}, []string{`unknown command "frob"`}},
		{[]string{"webhook", "create", "--name", "x"}, []string{"doctype", "event", "url", "homing webhook create --help"}},
		{[]string{"webhook", "create", "--name", "x", "--doctype", "D", "--event", "on_submit"}, []string{`required flag(s) "url" (or "url-template") not set`}},
		{create("x", "--max-retries", "many"), []string{"--max-retries", "many"}},
		{create("x", "--timeout", "5"), []string{"--timeout"}},
		{create("x", "--colour", "blue"), []string{"unknown flag: --colour"}},
		{create("x", "stray"), []string{`unexpected argument "stray"`}},
		{[]string{"webhook", "show"}, []string{"missing webhook NAME"}},
		{[]string{"webhook", "show", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"webhook", "update"}, []string{"missing webhook NAME"}},
		{[]string{"webhook", "update", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"webhook", "update", "a"}, []string{"nothing to update", "--url"}},
		{[]string{"webhook", "update", "a", "--json"}, []string{"nothing to update"}},
		{[]string{"delivery", "list", "--doc-name", "x"}, []string{"--doc-type"}},
		{[]string{"delivery", "list", "--until", "soon"}, []string{"--until", `"soon"`}},
		{[]string{"webhook", "list", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"webhook", "rotate-secret", "a", "--grace", "soon"}, []string{"--grace"}},
		{[]string{"delivery", "list", "--status", "Pending"}, []string{`"Pending"`, "Delivered, Failed, Exhausted"}},
		{[]string{"delivery", "list", "--limit", "0"}, []string{"--limit"}},
		{[]string{"delivery", "list", "--limit", "x"}, []string{"--limit"}},
		{[]string{"delivery", "show"}, []string{"missing delivery ID"}},
		{[]string{"migrate", "now"}, []string{`unexpected argument "now"`}},
		{[]string{"secrets"}, []string{"genkey"}},
		{[]string{"worker", "--concurrency", "5"}, []string{"unknown flag"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := s.fails(2, tc.args, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// TestCreateWithURLTemplateAlone: a URL made from each document needs no
// --url, as the README and the API have it.
func TestCreateWithURLTemplateAlone(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	got := object(t, s.ok("webhook", "create", "--name", "dyn", "--doctype", "Sales Order", "--event", "on_submit",
		"--url-template", "https://erp.example.com/api/{{ doc.name }}", "--json").stdout)
	if got["url_template"] != "https://erp.example.com/api/{{ doc.name }}" {
		t.Errorf("created %v, want its url_template kept", got)
	}
}

func TestHelpExits0(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	r := s.ok("--help")
	for _, cmd := range []string{"webhook", "delivery", "migrate", "secrets", "worker", "scheduler"} {
		if !strings.Contains(r.stdout, cmd) {
			t.Errorf("help does not list %q:\n%s", cmd, r.stdout)
		}
	}
	r = s.ok("webhook", "create", "--help")
	for _, flag := range []string{"--name", "--doctype", "--event", "--url", "--method", "--structure", "--template",
		"--field", "--header", "--condition", "--secret", "--signature", "--max-retries", "--timeout", "--queue",
		"--disabled", "--json", "--config"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("webhook create --help does not list %s", flag)
		}
	}
}

func TestConfigErrorsExit1(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	r := s.homingWith(missing, "webhook", "list")
	checkError(t, r, 1, "homing: ", "nope.yaml", "does not exist")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("sweeper:\n  interval: often\n  batch_sise: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = s.homingWith(bad, "webhook", "list")
	checkError(t, r, 1, "homing: ", "batch_sise")
}

func TestCreateShowListJSON(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	tmpl := `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`
	r := s.okWarning(`queue "critical" of webhook orders is served by no running worker`, "webhook", "create", "--name", "orders", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", "https://erp.example.com/hook", "--method", "put", "--template", tmpl,
		"--header", "X-Tenant: acme", "--header", "X-Trace: a, b", "--condition", `doc.status == "Paid"`,
		"--signature", "frappe", "--secret=an-operator-secret-1234", "--max-retries", "5", "--timeout", "1500ms",
		"--queue", "critical", "--json")
	got := object(t, r.stdout)
	checkKeys(t, "create --json", got, webhookKeys)
	want := map[string]any{
		"name": "orders", "doctype": "Sales Order", "event": "on_submit", "condition": `doc.status == "Paid"`,
		"url": "https://erp.example.com/hook", "method": "PUT", "structure": "json", "template": tmpl,
		"has_secret": true, "signature": "frappe", "enabled": true, "max_retries": float64(5),
		"queue": "critical", "timeout": "1.5s",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("create --json: %s = %#v, want %#v", k, got[k], v)
		}
	}
	if h, _ := got["headers"].(map[string]any); len(h) != 2 || h["X-Tenant"] != "acme" || h["X-Trace"] != "a, b" {
		t.Errorf("headers = %#v", got["headers"])
	}
	if f, _ := got["fields"].([]any); f == nil || len(f) != 0 {
		t.Errorf("fields = %#v, want []", got["fields"])
	}

	shown := object(t, s.ok("webhook", "show", "orders", "--json").stdout)
	checkKeys(t, "show --json", shown, append(slices.Clone(webhookKeys), "health"))
	for k, v := range want {
		if shown[k] != v {
			t.Errorf("show --json: %s = %#v, want %#v", k, shown[k], v)
		}
	}
	if shown["created_at"] != got["created_at"] {
		t.Errorf("show created_at %v != create's %v", shown["created_at"], got["created_at"])
	}

	s.ok(create("alerts", "--field", "name=id", "--field", "grand_total=amount", "--disabled")...)
	list := array(t, s.ok("webhook", "list", "--json").stdout)
	if len(list) != 2 || list[0]["name"] != "alerts" || list[1]["name"] != "orders" {
		t.Fatalf("list --json = %v, want alerts and orders by name", list)
	}
	for _, w := range list {
		checkKeys(t, "list --json", w, webhookKeys)
	}
	if list[0]["enabled"] != false || !slices.Equal(anyStrings(list[0]["fields"]), []string{"name=id", "grand_total=amount"}) {
		t.Errorf("alerts = %v", list[0])
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestCreateDefaultsComeFromConfig(t *testing.T) {
	t.Parallel()
	s := newSite(t, "retry:\n  default_max_retries: 7\ndelivery:\n  timeout: 9s\n  allow_private_networks: true\n")
	got := object(t, s.ok(create("orders", "--json")...).stdout)
	for k, v := range map[string]any{
		"max_retries": float64(7), "timeout": "9s", "method": "POST", "structure": "json",
		"enabled": true, "queue": "default", "has_secret": false, "signature": "none",
		"template": "", "condition": "",
	} {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
}

func TestCreatePlainSummary(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	r := s.ok(create("orders")...)
	want := `webhook "orders" created: on_submit of "Sales Order" -> POST https://example.com/hooks/orders` + "\n"
	if r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
}

func TestCreateRefusesInvalidWebhooks(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok(create("orders")...)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown event", []string{"webhook", "create", "--name", "a", "--doctype", "Sales Order", "--event", "on_save", "--url", "https://x.example"},
			[]string{`webhook "a": event: "on_save" is not a document event`, "on_submit", "workflow_transition"}},
		{"ftp url", create("b", "--url", "ftp://x"), []string{`homing: webhook "b": url: "ftp://x" is not http(s)`}},
		{"method", create("c", "--method", "GET"), []string{`webhook "c": method: "GET"`, "POST, PUT, PATCH, DELETE"}},
		{"structure", create("d", "--structure", "xml"), []string{`webhook "d": structure: "xml" is not json or form`}},
		{"signature", create("e", "--signature", "hmac"), []string{`webhook "e": signature`, `"hmac"`}},
		{"short whsec secret", create("f", "--secret", "whsec_c2hvcnQ="), []string{`webhook "f": secret`, "at least 16"}},
		{"template", create("g", "--template", "{{ doc.name"), []string{`webhook "g": template`}},
		{"condition", create("h", "--condition", "doc.total >"), []string{`webhook "h": condition`}},
		{"field", create("i", "--field", "=x"), []string{`webhook "i": field`}},
		{"header", create("j", "--header", "no colon"), []string{`webhook "j": header`}},
		{"max retries", create("k", "--max-retries", "-1"), []string{`webhook "k": max-retries`}},
		{"duplicate", create("orders"), []string{"already exists", `"orders"`}},
		{"template file", create("l", "--template", "@/nonexistent/body.j2"), []string{"--template @/nonexistent/body.j2", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.fails(1, tc.args, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout = %q", r.stdout)
			}
		})
	}
	if n := len(array(t, s.ok("webhook", "list", "--json").stdout)); n != 1 {
		t.Errorf("%d webhooks after refused creates, want 1", n)
	}
}

func TestTemplateFromFile(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	tmpl := "{\n  \"name\": \"{{ doc.name }}\",\n  \"total\": {{ doc.grand_total }}\n}\n"
	path := filepath.Join(t.TempDir(), "body.j2")
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ok(create("orders", "--template", "@"+path)...)
	if got := object(t, s.ok("webhook", "show", "orders", "--json").stdout)["template"]; got != tmpl {
		t.Errorf("template = %q, want the file's content %q", got, tmpl)
	}
	// A literal template is stored as given.
	s.ok("webhook", "update", "orders", "--template", `{"n": "{{ doc.name }}"}`)
	if got := object(t, s.ok("webhook", "show", "orders", "--json").stdout)["template"]; got != `{"n": "{{ doc.name }}"}` {
		t.Errorf("template = %q", got)
	}
}

func TestUpdateChangesOnlyGivenFlags(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	before := object(t, s.ok(create("orders", "--method", "PATCH", "--header", "X-A: 1", "--field", "name=id",
		"--max-retries", "2", "--secret", "an-operator-secret-1234", "--json")...).stdout)

	after := object(t, s.ok("webhook", "update", "orders", "--url", "https://new.example.com/h", "--json").stdout)
	checkKeys(t, "update --json", after, webhookKeys)
	for _, k := range webhookKeys {
		switch k {
		case "url":
			if after[k] != "https://new.example.com/h" {
				t.Errorf("url = %v", after[k])
			}
		case "updated_at":
		default:
			if !equalJSON(before[k], after[k]) {
				t.Errorf("update --url changed %s: %v -> %v", k, before[k], after[k])
			}
		}
	}
	if s.storedSecret("orders") != "an-operator-secret-1234" {
		t.Error("update without --secret changed the secret")
	}

	after = object(t, s.ok("webhook", "update", "orders", "--disabled", "--max-retries", "0", "--header", "X-B: 2", "--json").stdout)
	if after["enabled"] != false || after["max_retries"] != float64(0) || after["method"] != "PATCH" {
		t.Errorf("after update: %v", after)
	}
	if h := after["headers"].(map[string]any); len(h) != 1 || h["X-B"] != "2" {
		t.Errorf("--header should replace the headers, got %v", h)
	}
	after = object(t, s.ok("webhook", "update", "orders", "--header", "", "--field", "", "--json").stdout)
	if len(after["headers"].(map[string]any)) != 0 || len(after["fields"].([]any)) != 0 {
		t.Errorf("--header '' --field '' should empty the lists: %v", after)
	}
	after = object(t, s.ok("webhook", "update", "orders", "--disabled=false", "--name", "sales-orders", "--json").stdout)
	if after["enabled"] != true || after["name"] != "sales-orders" {
		t.Errorf("after rename and enable: %v", after)
	}
	s.fails(1, []string{"webhook", "show", "orders"}, "not found", `"orders"`)

	s.fails(1, []string{"webhook", "update", "nope", "--url", "https://x.example"}, "webhook not found", `"nope"`)
	s.fails(1, []string{"webhook", "update", "sales-orders", "--url", "ftp://x"}, `webhook "sales-orders": url: "ftp://x" is not http(s)`)
	if r := s.okWarning("add bulk=N to worker.queues", "webhook", "update", "sales-orders", "--queue", "bulk"); !strings.Contains(r.stdout, `webhook "sales-orders" updated`) {
		t.Errorf("plain update output: %q", r.stdout)
	}
}

func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !equalJSON(x[k], y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, equalJSON)
	default:
		return a == b
	}
}

func TestEnableDisableDeleteAndList(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	if r := s.ok("webhook", "list"); !strings.HasPrefix(r.stdout, "NAME") {
		t.Errorf("empty list = %q, want a header", r.stdout)
	}
	if r := s.ok("webhook", "list", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty list --json = %q, want []", r.stdout)
	}
	s.ok(create("orders")...)
	s.ok(create("invoices")...)
	if r := s.ok("webhook", "disable", "invoices"); r.stdout != "webhook \"invoices\" disabled\n" {
		t.Errorf("disable: %q", r.stdout)
	}
	r := s.ok("webhook", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("list:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`^NAME\s+DOCTYPE\s+EVENT\s+ENABLED\s+URL$`).MatchString(lines[0]) {
		t.Errorf("header = %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "invoices") || !strings.Contains(lines[1], "disabled") {
		t.Errorf("disabled webhook not marked: %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "orders") || strings.Contains(strings.ToLower(lines[2]), "disabled") ||
		!strings.Contains(lines[2], "Sales Order") || !strings.Contains(lines[2], "https://example.com/hooks/orders") {
		t.Errorf("enabled webhook row: %q", lines[2])
	}
	if r := s.ok("webhook", "show", "invoices"); !strings.Contains(r.stdout, "DISABLED") {
		t.Errorf("show of a disabled webhook does not say so:\n%s", r.stdout)
	}
	s.ok("webhook", "enable", "invoices")
	if got := object(t, s.ok("webhook", "show", "invoices", "--json").stdout)["enabled"]; got != true {
		t.Errorf("enabled = %v after enable", got)
	}
	if r := s.ok("webhook", "delete", "invoices"); r.stdout != "webhook \"invoices\" deleted\n" {
		t.Errorf("delete: %q", r.stdout)
	}
	s.fails(1, []string{"webhook", "show", "invoices"}, "webhook not found", `"invoices"`)
	s.fails(1, []string{"webhook", "delete", "invoices"}, "webhook not found")
	s.fails(1, []string{"webhook", "enable", "invoices"}, "webhook not found")
	s.fails(1, []string{"webhook", "disable", "invoices"}, "webhook not found")
}

var generated = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)

// outputsOf collects everything the read commands print about name.
func (s *site) outputsOf(name string) string {
	s.t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"webhook", "show", name}, {"webhook", "show", name, "--json"},
		{"webhook", "list"}, {"webhook", "list", "--json"},
	} {
		r := s.ok(args...)
		b.WriteString(r.stdout + r.stderr)
	}
	return b.String()
}

func TestGivenSecretIsNeverPrinted(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	const secret = "an-operator-secret-1234"
	// "--secret VALUE" with a space: VALUE is the secret, not a stray argument.
	for _, r := range []result{
		s.ok(create("orders", "--secret", secret)...),
		s.ok(create("invoices", "--secret", secret, "--json")...),
	} {
		if strings.Contains(r.stdout+r.stderr, secret) || strings.Contains(r.stdout, `"secret"`) {
			t.Errorf("create printed the given secret:\n%s", r)
		}
	}
	for _, name := range []string{"orders", "invoices"} {
		if got := s.storedSecret(name); got != secret {
			t.Errorf("stored secret of %s = %q", name, got)
		}
	}
	if out := s.outputsOf("orders"); strings.Contains(out, secret) {
		t.Errorf("read commands printed the secret:\n%s", out)
	}
	if got := object(t, s.ok("webhook", "show", "orders", "--json").stdout)["has_secret"]; got != true {
		t.Errorf("has_secret = %v", got)
	}

	// update NAME --secret VALUE, in either order.
	const next = "another-operator-secret"
	r := s.ok("webhook", "update", "orders", "--secret", next, "--json")
	if strings.Contains(r.stdout, next) {
		t.Errorf("update printed the given secret: %s", r.stdout)
	}
	if got := s.storedSecret("orders"); got != next {
		t.Errorf("stored secret after update = %q", got)
	}
	s.ok("webhook", "update", "--secret", secret, "orders")
	if got := s.storedSecret("orders"); got != secret {
		t.Errorf("stored secret after update --secret VALUE NAME = %q", got)
	}
	// --secret '' removes it.
	if got := object(t, s.ok("webhook", "update", "orders", "--secret=", "--json").stdout); got["has_secret"] != false || got["signature"] != "none" {
		t.Errorf("after removing the secret: %v", got)
	}
}

func TestGeneratedSecretIsPrintedOnce(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")

	r := s.ok(create("orders", "--secret")...)
	secrets := generated.FindAllString(r.stdout, -1)
	if len(secrets) != 1 || !strings.Contains(r.stdout, "\nsecret: "+secrets[0]+"\n") {
		t.Fatalf("plain create --secret should print one \"secret: whsec_...\" line:\n%s", r.stdout)
	}
	if got := s.storedSecret("orders"); got != secrets[0] {
		t.Errorf("printed secret %q is not the stored one %q", secrets[0], got)
	}
	if out := s.outputsOf("orders"); strings.Contains(out, secrets[0]) || generated.MatchString(out) {
		t.Errorf("the secret was printed again:\n%s", out)
	}

	// With --json the secret is a field of the output object, present only here.
	got := object(t, s.ok(create("invoices", "--json", "--secret")...).stdout)
	checkKeys(t, "create --json --secret", got, append(slices.Clone(webhookKeys), "secret"))
	secret, _ := got["secret"].(string)
	if !generated.MatchString(secret) || got["has_secret"] != true || got["signature"] != "both" {
		t.Errorf("create --json --secret = %v", got)
	}
	if s.storedSecret("invoices") != secret {
		t.Error("printed secret is not the stored one")
	}
	if out := s.outputsOf("invoices"); strings.Contains(out, secret) {
		t.Errorf("the secret was printed again:\n%s", out)
	}

	// update NAME --secret generates a new one.
	r = s.ok("webhook", "update", "orders", "--secret")
	fresh := generated.FindAllString(r.stdout, -1)
	if len(fresh) != 1 || fresh[0] == secrets[0] || s.storedSecret("orders") != fresh[0] {
		t.Errorf("update --secret: %s", r.stdout)
	}
}

func TestGeneratedSecretNeedsKey(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	noKey := filepath.Join(t.TempDir(), "nokey.yaml")
	if err := os.WriteFile(noKey, []byte("database:\n  url: \""+s.dsn+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.homingWith(noKey, create("orders", "--secret")...)
	checkError(t, r, 1, "homing: ", "secrets.key", "homing secrets genkey")
	if generated.MatchString(r.stdout + r.stderr) {
		t.Errorf("a secret that was not stored was printed:\n%s", r)
	}
}

func TestRotateSecret(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok(create("orders", "--secret", "an-operator-secret-1234")...)

	r := s.ok("webhook", "rotate-secret", "orders")
	secrets := generated.FindAllString(r.stdout, -1)
	if len(secrets) != 1 || !strings.Contains(r.stdout, "secret: "+secrets[0]+"\n") {
		t.Fatalf("rotate-secret should print the new secret once:\n%s", r.stdout)
	}
	if s.storedSecret("orders") != secrets[0] {
		t.Error("printed secret is not the stored one")
	}

	got := object(t, s.ok("webhook", "rotate-secret", "orders", "--grace", "1h", "--secret", "a-chosen-secret-5678", "--json").stdout)
	if _, ok := got["secret"]; ok || got["has_secret"] != true {
		t.Errorf("rotate-secret --secret VALUE printed: %v", got)
	}
	if s.storedSecret("orders") != "a-chosen-secret-5678" {
		t.Error("rotate-secret --secret VALUE did not store VALUE")
	}
	s.fails(1, []string{"webhook", "rotate-secret", "orders", "--grace", "200h"}, `webhook "orders": grace`, "168h")
	s.fails(1, []string{"webhook", "rotate-secret", "nope"}, "webhook not found")
}

// preview prints the request as it would go out, without sending it, and
// --secret-header values are never printed.
func TestWebhookPreviewAndSecretHeader(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	docFile := filepath.Join(t.TempDir(), "doc.json")
	if err := os.WriteFile(docFile, []byte(`{"name": "SO-1", "grand_total": 1500}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ok("webhook", "create", "--name", "orders", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", "https://erp.example.com/hook", "--template", `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`,
		"--secret-header", "Authorization: Bearer s3cret", "--sample-doc", "@"+docFile)
	for _, args := range [][]string{{"webhook", "show", "orders"}, {"webhook", "show", "orders", "--json"}, {"webhook", "list", "--json"}} {
		if r := s.ok(args...); strings.Contains(r.stdout, "s3cret") || !strings.Contains(r.stdout, "****") {
			t.Errorf("%v shows the secret header unmasked:\n%s", args, r.stdout)
		}
	}
	r := s.ok("webhook", "preview", "orders", "--doc", "@"+docFile)
	for _, want := range []string{"condition: true", "POST https://erp.example.com/hook", "Authorization: ****", "Content-Type: application/json", "User-Agent: Homing/", `{"name": "SO-1", "total": 1500}`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preview output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "s3cret") {
		t.Errorf("preview shows the secret:\n%s", r.stdout)
	}
	s.fails(1, []string{"webhook", "create", "--name", "bomb", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", "https://erp.example.com/hook", "--template", `"{{ '#' * doc.width }}"`, "--sample-doc", `{"width": 100000000000}`}, "size limit")
	s.fails(2, []string{"webhook", "preview", "orders", "--doc", "not json"}, "--doc: not a JSON object")

	// Not sendable is a failure, with the reason on stdout (issue 25).
	r = s.homing("webhook", "preview", "orders", "--doc", `{"name": "SO-2"}`)
	if r.code != 1 || !strings.Contains(r.stdout, "not sendable") || !strings.Contains(r.stdout, "grand_total") || r.stderr != "" {
		t.Errorf("preview of an unsendable document: %s", r)
	}
	if r = s.homing("webhook", "preview", "orders", "--doc", `{"name": "SO-2"}`, "--json"); r.code != 1 || !strings.Contains(r.stdout, `"error"`) {
		t.Errorf("preview --json of an unsendable document: %s", r)
	}
	// A template that is JSON for no document is refused at creation.
	r = s.homing("webhook", "create", "--name", "comma", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", "https://erp.example.com/hook", "--template", `{"name": "{{ doc.name }}", "total": {{ doc.total }},}`)
	if r.code == 0 || !strings.Contains(r.stderr, "not JSON") || !strings.Contains(r.stderr, "column 48") {
		t.Errorf("create with a trailing comma: %s", r)
	}
}

// webhook test sends the request once to the receiver, signed, prints the
// answer, and exits 1 when the receiver did not answer 2xx.
func TestWebhookTestSends(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	rc := testreceiver.New(t)
	s.ok("webhook", "create", "--name", "orders", "--doctype", "Sales Order", "--event", "on_submit",
		"--url", rc.URL+"/in", "--template", `{"name": "{{ doc.name }}"}`, "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	r := s.ok("webhook", "test", "orders", "--doc", `{"name": "SO-1"}`)
	if !strings.Contains(r.stdout, "receiver answered 200 (2xx)") || !strings.Contains(r.stdout, `{"receipt":1}`) {
		t.Errorf("webhook test printed:\n%s", r.stdout)
	}
	reqs := rc.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != `{"name": "SO-1"}` || signing.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", reqs[0].Header, reqs[0].Body, 0) != nil {
		t.Fatalf("the receiver got %+v", reqs)
	}
	// Its budget spent (for an hour, so that how long the commands take on
	// a loaded machine does not matter), the next test send is refused.
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr, DB: s.redis.DB})
	t.Cleanup(func() { _ = rdb.Close() })
	// The webhook service's key for a webhook's test sends.
	if err := ratelimit.New(rdb).Spend(context.Background(), "test:"+s.webhookID("orders"), time.Hour); err != nil {
		t.Fatal(err)
	}
	s.fails(1, []string{"webhook", "test", "orders", "--doc", `{"name": "SO-1"}`}, "one a second")
	if r := s.homing("webhook", "test", "orders"); r.code != 1 || !strings.Contains(r.stdout, "not sent") || rc.Count() != 1 {
		t.Errorf("a document the template cannot render: %s; receiver got %d", r, rc.Count())
	}
	s.fails(1, []string{"webhook", "test", "nope"}, "webhook not found")
}
