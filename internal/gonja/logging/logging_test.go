package logging_test

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/gonja"
	"github.com/homingdev/homing/internal/gonja/logging"
)

// The engine's logrus-shaped calls reach the slog.Logger that SetLogger
// was given, at its level, and nothing is written once it is unset.
func TestSetLogger(t *testing.T) {
	var buf bytes.Buffer
	logging.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: logging.LevelTrace})))
	t.Cleanup(func() { logging.SetLogger(nil) })
	if !logging.Enabled() {
		t.Fatal("Enabled() = false with a logger set")
	}
	logging.WithFields(logging.Fields{"b": 2, "a": 1}).Trace("parse")
	logging.Trace("step")
	logging.Errorf("Value.Len() not available for type: %s\n", "func")
	got := buf.String()
	for _, want := range []string{
		`level=DEBUG-4 msg=parse a=1 b=2` + "\n",
		`level=DEBUG-4 msg=step` + "\n",
		`level=ERROR msg="Value.Len() not available for type: func"` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}

	logging.SetLogger(nil)
	buf.Reset()
	if logging.Enabled() {
		t.Fatal("Enabled() = true after SetLogger(nil)")
	}
	logging.Errorf("dropped")
	if buf.Len() != 0 {
		t.Errorf("wrote %q with no logger", buf.String())
	}
}

// gonja.SetLoggerOutput and SetLoggerLevel (upstream's root API, on logrus
// there) turn the parser's trace on and off.
func TestSetLoggerOutput(t *testing.T) {
	var buf bytes.Buffer
	gonja.SetLoggerOutput(&buf)
	gonja.SetLoggerLevel(logging.LevelTrace)
	t.Cleanup(func() {
		gonja.SetLoggerOutput(io.Discard)
		gonja.SetLoggerLevel(slog.LevelInfo)
	})
	if _, err := gonja.FromString("{% if a %}{{ a + 1 }}{% endif %}"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "msg=ParseControlStructureBlock") {
		t.Errorf("no parser trace in:\n%s", buf.String())
	}

	gonja.SetLoggerOutput(io.Discard)
	buf.Reset()
	if _, err := gonja.FromString("{% if a %}{{ a + 1 }}{% endif %}"); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 || logging.Enabled() {
		t.Errorf("logged %q after SetLoggerOutput(io.Discard)", buf.String())
	}
}
