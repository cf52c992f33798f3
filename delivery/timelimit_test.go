package delivery

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The wall-clock time limit is no verdict on a definition: CPU load from
// other work can push a cheap template past it, so its stop is ErrTimeLimit
// (and ErrLimit) but never ErrUnbuildable, in every evaluator. The limits
// that the same definition and document always meet (steps, bytes) stay
// ErrUnbuildable. A limit of 1ns has passed before the evaluation starts,
// so the deadline is met without load.
func TestTimeLimitIsNoVerdict(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"a": []any{1, 1, 1}, "name": "SO-1"}
	const tiny = time.Nanosecond
	expr, err := CompileCondition(`all(doc.a, # > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	py, err := CompileConditionIn(LanguagePython, `doc.name.startswith("SO-") and len(doc.a) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	victim := `{"v": "{% for x in doc.a %}{% if x > 5 %}y{% endif %}{% endfor %}"}`
	timed := map[string]func() error{
		"json template": func() error {
			_, _, err := Build(Spec{Template: victim, TimeLimit: tiny}, doc)
			return err
		},
		"frappe template": func() error {
			_, _, err := Build(Spec{Compat: CompatFrappe, Template: `{% for x in doc.a %}{{ x }}{% endfor %}`, TimeLimit: tiny}, doc)
			return err
		},
		"url template": func() error {
			_, err := RenderURLWithin(`https://example.com/{% for x in doc.a %}{{ x }}{% endfor %}`, doc, "", time.Time{}, tiny)
			return err
		},
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
		if !errors.Is(err, ErrTimeLimit) || !errors.Is(err, ErrLimit) || errors.Is(err, ErrUnbuildable) || !NoVerdict(err) {
			t.Errorf("%s past its time limit: %v; want ErrTimeLimit and ErrLimit, not ErrUnbuildable", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "took longer than the time limit of 1ns") {
			t.Errorf("%s past its time limit: %q does not name the limit", name, err)
		}
	}

	// The same definitions with a time limit out of reach are fine: the
	// tiny limit alone stopped them.
	if _, _, err := Build(Spec{Template: victim, TimeLimit: outOfReach}, doc); err != nil {
		t.Errorf("json template within its time limit: %v", err)
	}
	if _, err := py.MatchWithin(doc, time.Time{}, outOfReach); err != nil {
		t.Errorf("python condition within its time limit: %v", err)
	}

	// Steps and bytes are the definition's own: final (each is met with
	// the time limit out of reach, so on any machine).
	steps, err := CompileCondition(`len(filter(1..100000000, # > 0)) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	final := map[string]func() error{
		"template bytes": func() error {
			_, _, err := Build(Spec{Template: `"{{ 'x' * 100000000000 }}"`, TimeLimit: outOfReach}, nil)
			return err
		},
		"template steps": func() error {
			_, _, err := Build(Spec{Template: `"{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"`, TimeLimit: outOfReach}, nil)
			return err
		},
		"expr condition steps": func() error {
			_, err := steps.MatchWithin(nil, time.Time{}, outOfReach)
			return err
		},
	}
	for name, eval := range final {
		if err := eval(); !errors.Is(err, ErrLimit) || !errors.Is(err, ErrUnbuildable) || NoVerdict(err) {
			t.Errorf("%s: %v; want ErrLimit and ErrUnbuildable", name, err)
		}
	}
}
