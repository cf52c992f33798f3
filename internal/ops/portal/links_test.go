package portal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// A link opens its tenant's portal until it expires or is revoked; a
// tampered one, or one signed with another key, opens nothing.
func TestLinks(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	clk := clock.NewStub(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	key := []byte("0123456789abcdef0123456789abcdef")
	links := portal.New(db, key, clk)
	ctx := context.Background()
	l, err := links.Create(ctx, "default", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := links.Open(ctx, l.Token); err != nil || got.Tenant != "default" || got.ID != l.ID {
		t.Fatalf("open: %+v, %v", got, err)
	}
	tampered := strings.Replace(l.Token, "v1.default.", "v1.acme.", 1)
	for name, tok := range map[string]string{"tampered": tampered, "cut": l.Token[:len(l.Token)-3], "garbage": "x"} {
		if _, err := links.Open(ctx, tok); !errors.Is(err, portal.ErrInvalid) {
			t.Errorf("%s link: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := portal.New(db, []byte("another key of thirty-two bytes!"), clk).Open(ctx, l.Token); !errors.Is(err, portal.ErrInvalid) {
		t.Errorf("link under another key: %v, want ErrInvalid", err)
	}
	clk.Advance(time.Hour)
	// An ended link still names its tenant: the page saying so is the
	// tenant's.
	if got, err := links.Open(ctx, l.Token); !errors.Is(err, portal.ErrExpired) || got.Tenant != "default" {
		t.Errorf("link at its expiry: %+v, %v, want ErrExpired and its tenant", got, err)
	}
	l2, err := links.Create(ctx, "default", 24*time.Hour, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := links.Revoke(ctx, "acme", l2.ID); !errors.Is(err, portal.ErrNotFound) {
		t.Errorf("another tenant's revoke: %v, want ErrNotFound", err)
	}
	if err := links.Revoke(ctx, "default", l2.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := links.Open(ctx, l2.Token); !errors.Is(err, portal.ErrRevoked) || got.Tenant != "default" {
		t.Errorf("revoked link: %+v, %v, want ErrRevoked and its tenant", got, err)
	}
	for _, ttl := range []time.Duration{time.Second, 25 * time.Hour, -time.Hour} {
		if _, err := links.Create(ctx, "default", ttl, token.Token{Name: "test"}); !errors.Is(err, portal.ErrBadTTL) {
			t.Errorf("ttl %s: %v, want ErrBadTTL", ttl, err)
		}
	}
	if _, err := portal.New(db, nil, clk).Create(ctx, "default", 0, token.Token{Name: "test"}); !errors.Is(err, portal.ErrNoKey) {
		t.Errorf("without a key: %v, want ErrNoKey", err)
	}
}

// Revoking a token revokes the links it made, and only those: a link made
// by another token, or by one revoked and made again under the same name,
// still opens.
func TestRevokingATokenRevokesItsLinks(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			clk := clock.NewStub(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
			links := portal.New(db, []byte("0123456789abcdef0123456789abcdef"), clk)
			tokens := token.New(db, clk, nil)
			ctx := context.Background()
			mint := func(name string) token.Token {
				t.Helper()
				tok, _, err := tokens.Create(ctx, name, token.ScopeAdmin, "")
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			link := func(by token.Token) portal.Link {
				t.Helper()
				l, err := links.Create(ctx, "default", 0, by)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			alice, bob := mint("alice"), mint("bob")
			byAlice, byBob := link(alice), link(bob)
			if err := tokens.Revoke(ctx, "alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := links.Open(ctx, byAlice.Token); !errors.Is(err, portal.ErrRevoked) {
				t.Errorf("alice's link after alice was revoked: %v, want ErrRevoked", err)
			}
			if _, err := links.Open(ctx, byBob.Token); err != nil {
				t.Errorf("bob's link after alice was revoked: %v", err)
			}
			byNewAlice := link(mint("alice"))
			if _, err := links.Open(ctx, byNewAlice.Token); err != nil {
				t.Errorf("the new alice's link: %v", err)
			}
		})
	}
}

// List shows a tenant's live links only, and RevokeAll revokes them, on
// both databases; another tenant's stay.
func TestListAndRevokeAll(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			clk := clock.NewStub(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
			links := portal.New(db, []byte("0123456789abcdef0123456789abcdef"), clk)
			ctx := context.Background()
			if _, err := tenant.New(db, clk, nil).Create(ctx, "acme", tenant.Patch{}); err != nil {
				t.Fatal(err)
			}
			issue := func(tenant string, ttl time.Duration) portal.Link {
				t.Helper()
				l, err := links.Create(ctx, tenant, ttl, token.Token{Name: "ops"})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			expiring, live, revoked, acme := issue("default", time.Minute), issue("default", time.Hour), issue("default", time.Hour), issue("acme", time.Hour)
			if err := links.Revoke(ctx, "default", revoked.ID); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Minute)
			got, err := links.List(ctx, "default")
			if err != nil || len(got) != 1 || got[0].ID != live.ID || got[0].CreatedBy != "ops" || !got[0].ExpiresAt.Equal(live.ExpiresAt) {
				t.Fatalf("default's live links: %+v, %v; want only %s (not the expired %s or the revoked %s)", got, err, live.ID, expiring.ID, revoked.ID)
			}
			if n, err := links.RevokeAll(ctx, "default"); err != nil || n != 1 {
				t.Fatalf("revoke all of default's: %d, %v; want 1", n, err)
			}
			if _, err := links.Open(ctx, live.Token); !errors.Is(err, portal.ErrRevoked) {
				t.Errorf("a link after revoke all: %v, want ErrRevoked", err)
			}
			if _, err := links.Open(ctx, acme.Token); err != nil {
				t.Errorf("acme's link after default's revoke all: %v", err)
			}
		})
	}
}
