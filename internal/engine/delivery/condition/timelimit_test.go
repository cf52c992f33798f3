package condition

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// The wall-clock time limit is no verdict on a definition: CPU load from
// other work can push a cheap condition past it, so its stop is
// ErrTimeLimit (and ErrLimit) but never ErrUnbuildable, in both condition
// languages (and every template, TestTimeLimitIsNoVerdict). The limits that
// the same definition and document always meet (steps, bytes) stay
// ErrUnbuildable. A limit of 1ns has passed before the evaluation starts,
// so the deadline is met without load.
func TestConditionTimeLimitIsNoVerdict(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"a": []any{1, 1, 1}, "name": "SO-1"}
	const tiny = time.Nanosecond
	expr, err := Compile(`all(doc.a, # > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	py, err := CompileIn(LanguagePython, `doc.name.startswith("SO-") and len(doc.a) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	timed := map[string]func() error{
		"expr condition": func() error {
			_, err := expr.MatchWithin(doc, time.Time{}, tiny)
			return err
		},
		"python condition": func() error {
			_, err := py.MatchWithin(doc, time.Time{}, tiny)
			return err
		},
	}
	for name, eval := range timed {
		err := eval()
		if !errors.Is(err, budget.ErrTimeLimit) || !errors.Is(err, budget.ErrLimit) || errors.Is(err, send.ErrUnbuildable) || !budget.NoVerdict(err) {
			t.Errorf("%s past its time limit: %v; want ErrTimeLimit and ErrLimit, not ErrUnbuildable", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "took longer than the time limit of 1ns") {
			t.Errorf("%s past its time limit: %q does not name the limit", name, err)
		}
	}

	// The same definition with a time limit out of reach is fine: the tiny
	// limit alone stopped it.
	if _, err := py.MatchWithin(doc, time.Time{}, outOfReach); err != nil {
		t.Errorf("python condition within its time limit: %v", err)
	}

	// Steps and bytes are the definition's own: final (each is met with
	// the time limit out of reach, so on any machine).
	steps, err := Compile(`len(filter(1..100000000, # > 0)) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := steps.MatchWithin(nil, time.Time{}, outOfReach); !errors.Is(err, budget.ErrLimit) || !errors.Is(err, send.ErrUnbuildable) || budget.NoVerdict(err) {
		t.Errorf("expr condition steps: %v; want ErrLimit and ErrUnbuildable", err)
	}
}
