package portal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/clock"
	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/portal"
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
	l, err := links.Create(ctx, "default", 0, "test")
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
	if _, err := links.Open(ctx, l.Token); !errors.Is(err, portal.ErrExpired) {
		t.Errorf("link at its expiry: %v, want ErrExpired", err)
	}
	l2, err := links.Create(ctx, "default", 24*time.Hour, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := links.Revoke(ctx, "acme", l2.ID); !errors.Is(err, portal.ErrNotFound) {
		t.Errorf("another tenant's revoke: %v, want ErrNotFound", err)
	}
	if err := links.Revoke(ctx, "default", l2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := links.Open(ctx, l2.Token); !errors.Is(err, portal.ErrRevoked) {
		t.Errorf("revoked link: %v, want ErrRevoked", err)
	}
	for _, ttl := range []time.Duration{time.Second, 25 * time.Hour, -time.Hour} {
		if _, err := links.Create(ctx, "default", ttl, "test"); !errors.Is(err, portal.ErrBadTTL) {
			t.Errorf("ttl %s: %v, want ErrBadTTL", ttl, err)
		}
	}
	if _, err := portal.New(db, nil, clk).Create(ctx, "default", 0, "test"); !errors.Is(err, portal.ErrNoKey) {
		t.Errorf("without a key: %v, want ErrNoKey", err)
	}
}
