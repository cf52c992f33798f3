package template

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// The wall-clock time limit is no verdict on a definition: CPU load from
// other work can push a cheap template past it, so its stop is ErrTimeLimit
// (and ErrLimit) but never ErrUnbuildable, in every template (and every
// condition, TestConditionTimeLimitIsNoVerdict). The limits that the same
// definition and document always meet (steps, bytes) stay ErrUnbuildable.
// A limit of 1ns has passed before the evaluation starts, so the deadline
// is met without load.
func TestTimeLimitIsNoVerdict(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"a": []any{1, 1, 1}, "name": "SO-1"}
	const tiny = time.Nanosecond
	victim := `{"v": "{% for x in doc.a %}{% if x > 5 %}y{% endif %}{% endfor %}"}`
	timed := map[string]func() error{
		"json template": func() error {
			_, err := Render(victim, doc, 0, tiny)
			return err
		},
		"frappe template": func() error {
			_, err := RenderFrappe(`{% for x in doc.a %}{{ x }}{% endfor %}`, doc, MaxRenderedBytes, time.Time{}, tiny)
			return err
		},
		"url template": func() error {
			_, err := RenderURLWithin(`https://example.com/{% for x in doc.a %}{{ x }}{% endfor %}`, doc, "", time.Time{}, tiny)
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
	if _, err := untimedRender(victim, doc, 0); err != nil {
		t.Errorf("json template within its time limit: %v", err)
	}

	// Steps and bytes are the definition's own: final (each is met with
	// the time limit out of reach, so on any machine).
	final := map[string]func() error{
		"template bytes": func() error {
			_, err := untimedRender(`"{{ 'x' * 100000000000 }}"`, nil, 0)
			return err
		},
		"template steps": func() error {
			_, err := untimedRender(`"{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"`, nil, 0)
			return err
		},
	}
	for name, eval := range final {
		if err := eval(); !errors.Is(err, budget.ErrLimit) || !errors.Is(err, send.ErrUnbuildable) || budget.NoVerdict(err) {
			t.Errorf("%s: %v; want ErrLimit and ErrUnbuildable", name, err)
		}
	}
}
