package cli_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/ops/token"
)

// authenticate checks plain against the site's database as the API would.
func (s *site) authenticate(plain string) (token.Token, error) {
	s.t.Helper()
	db, err := store.Open(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	return token.New(db, nil, nil).Authenticate(context.Background(), plain)
}

func TestTokenCommands(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.ok("migrate")

	r := s.ok("token", "create", "--name", "frappe")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	plain := lines[len(lines)-1]
	if len(lines) != 2 || !strings.Contains(lines[0], `"frappe"`) || !strings.Contains(lines[0], "publish") || !strings.HasPrefix(plain, token.Prefix) {
		t.Fatalf("token create printed %q, want a note naming the token and scope, then the token alone on the last line", r.stdout)
	}
	if tok, err := s.authenticate(plain); err != nil || tok.Name != "frappe" || tok.Scope != token.ScopePublish {
		t.Fatalf("the printed token authenticates as %+v, %v", tok, err)
	}

	created := object(t, s.ok("token", "create", "--name", "ops", "--scope", "ADMIN", "--json").stdout)
	checkKeys(t, "token create --json", created, []string{"name", "scope", "tenant", "operator", "created_at", "last_used_at", "token"})
	adminPlain, _ := created["token"].(string)
	if created["scope"] != "admin" || !strings.HasPrefix(adminPlain, token.Prefix) || adminPlain == plain {
		t.Fatalf("token create --json = %v", created)
	}

	list := array(t, s.ok("token", "list", "--json").stdout)
	if len(list) != 2 || list[0]["name"] != "frappe" || list[1]["name"] != "ops" {
		t.Fatalf("token list --json = %v", list)
	}
	for _, tok := range list {
		checkKeys(t, "token list --json", tok, []string{"name", "scope", "tenant", "operator", "created_at", "last_used_at"})
	}
	if list[0]["last_used_at"] == nil || list[1]["last_used_at"] != nil {
		t.Errorf("last_used_at = %v, %v: want the used token dated and the unused one null", list[0]["last_used_at"], list[1]["last_used_at"])
	}
	table := s.ok("token", "list").stdout
	for _, want := range []string{"NAME", "SCOPE", "frappe", "publish", "ops", "admin"} {
		if !strings.Contains(table, want) {
			t.Errorf("token list does not show %q:\n%s", want, table)
		}
	}
	for _, out := range []string{table, s.ok("token", "list", "--json").stdout} {
		if strings.Contains(out, plain) || strings.Contains(out, adminPlain) || strings.Contains(out, token.Hash(plain)) {
			t.Errorf("token list printed a token or its hash:\n%s", out)
		}
	}

	s.fails(1, []string{"token", "create", "--name", "frappe"}, `"frappe"`, "already exists")
	s.fails(2, []string{"token", "create", "--name", "x", "--scope", "root"}, `--scope "root"`, "publish, admin")
	s.fails(2, []string{"token", "create"}, "name")
	s.fails(2, []string{"token", "revoke"}, "missing token NAME")

	if r := s.ok("token", "revoke", "frappe"); r.stdout != "token \"frappe\" revoked\n" {
		t.Errorf("revoke printed %q", r.stdout)
	}
	if _, err := s.authenticate(plain); !errors.Is(err, token.ErrUnknown) {
		t.Errorf("a revoked token authenticates: %v", err)
	}
	s.fails(1, []string{"token", "revoke", "frappe"}, `"frappe"`, "homing token list")
}
