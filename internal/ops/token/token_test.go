package token_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestTokenLifecycle(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			clk := clock.NewStub(t0)
			svc := token.New(db, clk, nil)
			ctx := context.Background()

			tok, plain, err := svc.Create(ctx, "frappe", "", "")
			if err != nil {
				t.Fatal(err)
			}
			if tok.Scope != token.ScopePublish || tok.Name != "frappe" || !tok.CreatedAt.Equal(t0) || tok.LastUsedAt != nil {
				t.Errorf("created %+v, want publish scope by default", tok)
			}
			raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(plain, token.Prefix))
			if !strings.HasPrefix(plain, token.Prefix) || err != nil || len(raw) != 32 {
				t.Errorf("token %q is not %s + base64url of 32 bytes", plain, token.Prefix)
			}
			var row models.APIToken
			if err := db.Where("name = ?", "frappe").Take(&row).Error; err != nil {
				t.Fatal(err)
			}
			if row.TokenHash != token.Hash(plain) || strings.Contains(row.TokenHash, plain) || len(row.TokenHash) != 64 {
				t.Errorf("stored hash %q, want the SHA-256 hex of the token and never the token", row.TokenHash)
			}

			if _, _, err := svc.Create(ctx, "frappe", "admin", ""); !errors.Is(err, token.ErrExists) {
				t.Errorf("second token named frappe: %v, want ErrExists", err)
			}
			if _, _, err := svc.Create(ctx, "x", "root", ""); !errors.Is(err, token.ErrInvalid) || !strings.Contains(err.Error(), "publish, admin") {
				t.Errorf("scope root: %v", err)
			}
			if _, _, err := svc.Create(ctx, " ", "", ""); !errors.Is(err, token.ErrInvalid) {
				t.Errorf("blank name: %v", err)
			}
			_, adminPlain, err := svc.Create(ctx, "ops", token.ScopeAdmin, "")
			if err != nil {
				t.Fatal(err)
			}
			if adminPlain == plain {
				t.Fatal("two tokens are equal")
			}

			got, err := svc.Authenticate(ctx, plain)
			if err != nil || got.Name != "frappe" || got.Scope != token.ScopePublish {
				t.Fatalf("Authenticate = %+v, %v", got, err)
			}
			if got.LastUsedAt == nil || !got.LastUsedAt.Equal(t0) {
				t.Errorf("last_used_at = %v, want %s", got.LastUsedAt, t0)
			}
			// Within a minute the use is not written again; after it, it is.
			clk.Advance(30 * time.Second)
			got, _ = svc.Authenticate(ctx, plain)
			if !got.LastUsedAt.Equal(t0) {
				t.Errorf("last_used_at moved to %v within a minute", got.LastUsedAt)
			}
			clk.Advance(time.Minute)
			if _, err := svc.Authenticate(ctx, plain); err != nil {
				t.Fatal(err)
			}
			list, err := svc.List(ctx)
			if err != nil || len(list) != 2 || list[0].Name != "frappe" || list[1].Name != "ops" {
				t.Fatalf("List = %+v, %v", list, err)
			}
			if !list[0].LastUsedAt.Equal(t0.Add(90*time.Second)) || list[1].LastUsedAt != nil {
				t.Errorf("List last_used_at = %v, %v", list[0].LastUsedAt, list[1].LastUsedAt)
			}

			for _, bad := range []string{"", "hmg_", plain + "x", strings.TrimPrefix(plain, token.Prefix), token.Hash(plain)} {
				if _, err := svc.Authenticate(ctx, bad); !errors.Is(err, token.ErrUnknown) {
					t.Errorf("Authenticate(%q) = %v, want ErrUnknown", bad, err)
				}
			}
			if err := svc.Revoke(ctx, "frappe"); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Authenticate(ctx, plain); !errors.Is(err, token.ErrUnknown) {
				t.Errorf("revoked token: %v, want ErrUnknown", err)
			}
			if err := svc.Revoke(ctx, "frappe"); !errors.Is(err, token.ErrNotFound) {
				t.Errorf("second revoke: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestAllows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scope, need string
		ok          bool
	}{
		{token.ScopeAdmin, token.ScopeAdmin, true},
		{token.ScopeAdmin, token.ScopePublish, true},
		{token.ScopePublish, token.ScopePublish, true},
		{token.ScopePublish, token.ScopeAdmin, false},
		{"", token.ScopePublish, false},
	} {
		if got := token.Allows(tc.scope, tc.need); got != tc.ok {
			t.Errorf("Allows(%q, %q) = %v", tc.scope, tc.need, got)
		}
	}
}

// TestRevokedElsewhere: a token revoked by another process (another
// Service on the same database) is refused here once the token this
// Service checked is over a second old, and not before: the lookup a
// second is what the cache saves.
func TestRevokedElsewhere(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			clk := clock.NewStub(t0)
			serve, cli := token.New(db, clk, nil), token.New(db, clk, nil)
			ctx := context.Background()
			_, plain, err := cli.Create(ctx, "frappe", "", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := serve.Authenticate(ctx, plain); err != nil {
				t.Fatal(err)
			}
			if err := cli.Revoke(ctx, "frappe"); err != nil {
				t.Fatal(err)
			}
			clk.Advance(500 * time.Millisecond)
			if _, err := serve.Authenticate(ctx, plain); err != nil {
				t.Errorf("within the second the check is believed: %v", err)
			}
			clk.Advance(500 * time.Millisecond)
			if _, err := serve.Authenticate(ctx, plain); !errors.Is(err, token.ErrUnknown) {
				t.Errorf("a second after the check, the revoked token: %v, want ErrUnknown", err)
			}
		})
	}
}
