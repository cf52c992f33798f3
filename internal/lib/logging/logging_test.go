package logging

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestAutoFormatIsJSONOffATerminal: a pipe (a container's log, a file, a
// supervisor) gets one JSON object a line from the default format, as a
// program reading it expects.
func TestAutoFormatIsJSONOffATerminal(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if IsTerminal(w) {
		t.Fatal("a pipe counts as a terminal")
	}
	for _, format := range []string{"auto", ""} {
		log, err := New(w, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("worker started", "concurrency", 50)
	}
	_ = w.Close()
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(lines.Bytes(), &rec); err != nil || rec["msg"] != "worker started" {
			t.Errorf("line %q is not the JSON record: %v", lines.Text(), err)
		}
	}
}

// TestTimeOfDay: on a terminal a line starts with the local time of day,
// not a date and zone.
func TestTimeOfDay(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 4, 13, 2, 3, 45e6, time.Local)
	got := timeOfDay(nil, slog.Time(slog.TimeKey, at))
	if got.Value.String() != "13:02:03.045" {
		t.Errorf("time of day %q, want 13:02:03.045", got.Value.String())
	}
	if kept := timeOfDay([]string{"g"}, slog.Time(slog.TimeKey, at)); kept.Value.Kind() != slog.KindTime {
		t.Errorf("an attribute named time inside a group was rewritten: %v", kept)
	}
	if _, err := New(os.Stderr, "info", "xml"); err == nil || !regexp.MustCompile(`auto, json or text`).MatchString(err.Error()) {
		t.Errorf("format xml: %v", err)
	}
}
