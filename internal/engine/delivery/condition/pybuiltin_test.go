package condition

import (
	"errors"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// int(str) refuses more than Python's 4,300 digits, as Python does, with
// Python's message: parsing decimal digits is quadratic in their number
// (issue 25: a megabyte of digits took 2.4 s in one step).
func TestPythonIntConversionsHavePythonsDigitLimit(t *testing.T) {
	t.Parallel()
	digits := strings.Repeat("7", 1_000_000)
	for _, tc := range []struct {
		src, d, want string
	}{
		{"int(doc.d) > 0", digits, "Exceeds the limit (4300 digits) for integer string conversion: value has 1000000 digits"},
		{"int(doc.d) > 0", "-" + strings.Repeat("1", 4301), "value has 4301 digits"},
		{"int(doc.d, 0) > 0", digits, "value has 1000000 digits"}, // base 0 reads decimal too
		{"len(str(int(doc.d) * int(doc.d))) > 0", strings.Repeat("9", 4000), "Exceeds the limit (4300 digits) for integer string conversion"},
		{"len('%d' % (int(doc.d) * int(doc.d))) > 0", strings.Repeat("9", 4000), "Exceeds the limit (4300 digits) for integer string conversion"},
		{"cstr(int(doc.d) * int(doc.d)) != ''", strings.Repeat("9", 4000), "Exceeds the limit (4300 digits) for integer string conversion"},
	} {
		c, err := CompileIn(LanguagePython, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = untimedMatch(c, map[string]any{"d": tc.d})
		if !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s on %d bytes: %v, want refused with %q", tc.src, len(tc.d), err, tc.want)
		}
	}
	for _, src := range []string{"int(doc.d) > 0", "len(str(int(doc.d))) == 4300", "len(str(-int(doc.d))) == 4301", "int('0x' + doc.d * 3, 16) > 0"} {
		c, err := CompileIn(LanguagePython, src)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := untimedMatch(c, map[string]any{"d": strings.Repeat("7", 4300)}); !ok || err != nil {
			t.Errorf("%s on 4300 digits = %v, %v; want true (Python's limit allows it)", src, ok, err)
		}
	}
}

// Every built-in, method and operator a condition reaches charges what it
// builds before building it: each of these builds more than the budget.
func TestPythonBuiltinsChargeWhatTheyBuild(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("x", 900_000)
	items := make([]any, 120_000)
	for i := range items {
		items[i] = "abcdefgh"
	}
	doc := map[string]any{"s": s, "items": items, "n": strings.Repeat("9", 4000)}
	chain := func(expr, op string, n int) string { return strings.TrimSuffix(strings.Repeat(expr+op, n), op) }
	for _, src := range []string{
		"len(str(doc.items)) > 0",                                 // str of a list: its repr
		"len('%s' % doc.items) > 0",                               // % formatting
		"len((" + chain("doc.s.lower()", ",", 12) + ")) > 0",      // a method's result, twelve times
		"len(doc.s" + strings.Repeat(".upper().lower()", 6) + ")", // chained methods
		"len((" + chain("doc.s[::-1]", ",", 12) + ")) > 0",        // slices
		"(" + chain("int(doc.n)", " * ", 40) + ") > 0",            // big-int growth by multiplication
		"len((" + chain("cstr(doc.s)", ",", 12) + ")) > 0",        // helpers
		"len((" + chain("doc.get('items')", ",", 12) + ")) > 0",   // list conversions
	} {
		c, err := CompileIn(LanguagePython, src)
		if err != nil {
			t.Fatalf("%.80s: %v", src, err)
		}
		if _, err := untimedMatch(c, doc); !errors.Is(err, budget.ErrLimit) {
			t.Errorf("%.80s: %v, want a limit", src, err)
		}
	}
}

// The allow-list: every name a condition can call, every method and the
// operator helper have a cost, and nothing in the environment is one of
// Starlark's own built-ins unwrapped.
func TestPythonEnvironmentHasACostForEverythingExposed(t *testing.T) {
	t.Parallel()
	var walk func(prefix string, d starlark.StringDict)
	walk = func(prefix string, d starlark.StringDict) {
		for name, v := range d {
			switch x := v.(type) {
			case *starlark.Builtin:
				if _, ok := pyBuiltins[x.Name()]; !ok {
					t.Errorf("%s%s is exposed without a cost in pyBuiltins", prefix, name)
				}
				for _, u := range starlark.Universe {
					if u == v {
						t.Errorf("%s%s is Starlark's own built-in, uncharged", prefix, name)
					}
				}
			case interface{ AttrNames() []string }:
				members := starlark.StringDict{}
				for _, a := range x.AttrNames() {
					m, _ := v.(starlark.HasAttrs).Attr(a)
					members[a] = m
				}
				walk(prefix+name+".", members)
			case starlark.Bool, starlark.NoneType:
			default:
				t.Errorf("%s%s is a %s the allow-list does not know", prefix, name, v.Type())
			}
		}
	}
	walk("", pyEnv())
	for _, name := range pyFunctions {
		if _, ok := pyBuiltins[name]; !ok {
			t.Errorf("function %s has no cost", name)
		}
	}
	// A string method outside the list is refused when compiled.
	for _, name := range starlark.String("").AttrNames() {
		if _, ok := pyMethodCosts[name]; ok {
			continue
		}
		if _, err := CompileIn(LanguagePython, "doc.s."+name+"()"); err == nil {
			t.Errorf(".%s() compiles without a cost", name)
		}
	}
}

// pythonReproductions are issue 25's Python conditions; the fuzz target
// starts from them (and tests/hostile_test.go runs them end to end).
var pythonReproductions = []string{
	"int(doc.d) > 0",
	"len(str(int(doc.d) * int(doc.d))) > 0",
	"len('%d' % (int(doc.d) * int(doc.d))) > 0",
	"(int(doc.d) * int(doc.d) * int(doc.d) * int(doc.d) * int(doc.d) * int(doc.d)) > 0",
	"len(str(doc.items)) > 0",
	"len('%s' % doc.items) > 0",
	"len(doc.s.upper().lower().upper().lower().upper().lower()) > 0",
	"len((doc.s[::-1], doc.s[::-1], doc.s[::-1])) > 0",
	"len(doc.s * 100000) > 0",
	"cstr(doc.s) + cstr(doc.s) != ''",
	"doc.get('items') == doc.items",
	"float(doc.d) > 0 and int(doc.d[:4300]) > 0",
}

// FuzzPythonCondition compiles and evaluates arbitrary Python conditions
// under the limits: never a panic, and every failure is either the
// definition's (ErrUnbuildable) or the process's heap ceiling
// (ErrOverloaded, when it runs with a memory limit). The time limit is out
// of reach: steps and sizes stop every condition, so no outcome depends on
// the machine.
func FuzzPythonCondition(f *testing.F) {
	for _, s := range pythonReproductions {
		f.Add(s)
	}
	for _, s := range []string{"doc.status == 'Paid'", "doc.name.startswith('SO-')", "utils.add_days(doc.d, 1)", "doc.items[0] in doc.s"} {
		f.Add(s)
	}
	doc := map[string]any{"status": "Paid", "name": "SO-1", "s": strings.Repeat("ab", 2000), "d": strings.Repeat("9", 5000), "items": []any{"a", "b", map[string]any{"q": int64(1)}}}
	f.Fuzz(func(t *testing.T, src string) {
		cond, err := CompileIn(LanguagePython, src)
		if err != nil {
			if !errors.Is(err, send.ErrUnbuildable) {
				t.Fatalf("compile error %v does not wrap ErrUnbuildable", err)
			}
			return
		}
		if _, err := untimedMatch(cond, doc); err != nil && !errors.Is(err, send.ErrUnbuildable) && !errors.Is(err, budget.ErrOverloaded) {
			t.Fatalf("match error %v wraps neither ErrUnbuildable nor ErrOverloaded", err)
		}
	})
}
