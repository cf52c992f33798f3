package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/logging"
)

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{500 * time.Millisecond, "now"},
		{4 * time.Minute, "in 4m"},
		{-3*time.Minute - 20*time.Second, "3m ago"},
		{-45 * time.Second, "45s ago"},
		{2*time.Hour + 35*time.Minute, "in 2h35m"},
		{-(3*24 + 4) * time.Hour, "3d4h ago"},
	} {
		if got := relative(now.Add(tc.d), now); got != tc.want {
			t.Errorf("relative(now%+v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
	got := truncate("ab€cd", 3) // € is 3 bytes from index 2: cut before it
	if !strings.HasPrefix(got, "ab…") || !strings.Contains(got, "(5 more bytes") {
		t.Errorf("truncate on a rune = %q, want ab… and 5 more bytes", got)
	}
}

// TestProgressBar: each call redraws the line in place, and the count
// follows what was done.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	draw := progressBar(&b)
	draw(1500, 4000)
	draw(4000, 4000)
	want := "\r[###########...................] 1,500/4,000\r[##############################] 4,000/4,000"
	if b.String() != want {
		t.Errorf("progress drew\n%q\nwant\n%q", b.String(), want)
	}
	if logging.IsTerminal(&b) {
		t.Error("a strings.Builder counts as a terminal")
	}
}
