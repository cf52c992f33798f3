package template

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/gonja/builtins"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// spent renders src with its own limits and returns the steps and bytes
// of budget it used.
func spent(t *testing.T, src string) (steps, bytes int) {
	t.Helper()
	tpl, err := parseTemplate(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	l := newRenderLimits(t.Context(), time.Minute, MaxRenderedBytes)
	if err := tpl.ExecuteLimited(&bodyWriter{limits: l}, exec.NewContext(map[string]any{"doc": map[string]any{}}), l); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return l.Spent()
}

// dictLiteral2000 sets d to a dict literal of 2,000 keys.
var dictLiteral2000 = func() string {
	var b strings.Builder
	b.WriteString(`{% set d = {`)
	for i := range 2000 {
		fmt.Fprintf(&b, "'k%d': %d, ", i, i)
	}
	b.WriteString(`'end': 0} %}`)
	return b.String()
}()

// TestWorkGrowsWithOperands holds that what a comparison, a membership
// test (operator or Jinja test) or a receiver's copy costs grows with its
// operands: each case costs at least minSteps steps and minBytes bytes more
// than the same template without it. Before, each cost one step.
func TestWorkGrowsWithOperands(t *testing.T) {
	t.Parallel()

	big := `{% set s = 'x' * 500000 %}{% set u = 'x' * 500000 %}{% set l = ('x' * 10000) | list %}` + dictLiteral2000
	for _, tt := range []struct {
		name, expr         string
		minSteps, minBytes int
	}{
		{"InString", `{% if 'y' in s %}{% endif %}`, 500_000 / fastTextBytes, 0},
		{"InDictLiteral", `{% if 'y' in d %}{% endif %}`, 2_000 / walkItemsPerStep, 2_000 * compareItemBytes},
		{"InDocument", `{% if 'y' in doc %}{% endif %}`, 1, 0},
		{"EqualStrings", `{% if s == u %}{% endif %}`, 1_000_000 / fastTextBytes, 0},
		{"LessStrings", `{% if s < u %}{% endif %}`, 1_000_000 / fastTextBytes, 0},
		{"InList", `{% if 'y' in l %}{% endif %}`, 10_000 / walkItemsPerStep, 10_000 * compareItemBytes},
		{"EqualLists", `{% if l == l %}{% endif %}`, 20_000 / walkItemsPerStep, 20_000 * compareItemBytes},
		{"TestIn", `{% if 'y' is in s %}{% endif %}`, 500_000 / fastTextBytes, 0},
		{"TestEq", `{% if l is eq l %}{% endif %}`, 20_000 / walkItemsPerStep, 0},
		{"TestLower", `{% if s is lower %}{% endif %}`, 500_000 / fastTextBytes, 500_000},
		{"ListCopy", `{% set c = l.copy() %}`, 10_000 / walkItemsPerStep, 10_000 * itemBytes},
		{"StrideSlice", `{% set c = s[::2] %}`, 500_000 / fastTextBytes, 4 * 500_000},
		{"ForOverList", `{% for c in l %}{% endfor %}`, 10_000, 10_000 * compareItemBytes},
		{"Length", `{% set n = s | length %}`, 500_000 / fastTextBytes, 0},
		{"StrMethod", `{% set c = s.upper() %}`, 500_000 / fastTextBytes, 500_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			baseSteps, baseBytes := spent(t, big)
			steps, bytes := spent(t, big+tt.expr)
			if steps-baseSteps < tt.minSteps || bytes-baseBytes < tt.minBytes {
				t.Errorf("%s costs %d steps and %d bytes, want at least %d and %d", tt.expr, steps-baseSteps, bytes-baseBytes, tt.minSteps, tt.minBytes)
			}
		})
	}
}

// TestRangeIsChargedOnce: range's list is charged before it is built, and
// not again as the function's result.
func TestRangeIsChargedOnce(t *testing.T) {
	t.Parallel()

	// A 200 KB body cap gives a 1.6 MB budget: six lists of 200 KB fit
	// once, not twice.
	src := `{% for i in range(6) %}{% set r = range(25000) %}{% endfor %}1`
	if _, err := untimedRender(src, nil, 200_000); err != nil {
		t.Errorf("%s: %v", src, err)
	}
}

// TestStringConversionsDoNotCopy: a string's length and a slice of it no longer convert the whole string to runes (4 bytes a
// character) on every use, which no limit saw.
func TestStringConversionsDoNotCopy(t *testing.T) {
	const maxAlloc = 64 << 20
	src := `{% set s = 'é' * 200000 %}{% for i in range(50) %}{{ s | length }}{{ s[1:3] }}{% endfor %}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body, err := render(t.Context(), src, nil, MaxRenderedBytes, time.Minute, renderMode{text: true})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("200000éé", 50); string(body) != want {
		t.Errorf("rendered %.40q…, want %.40q…", body, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxAlloc {
		t.Errorf("rendering allocated %d MiB, want under %d MiB", alloc>>20, maxAlloc>>20)
	}
}

// TestDictMethodsActOnTheDict: a document's or namespace's methods see
// the map itself, without a copy per call, and change it as Python does.
func TestDictMethodsActOnTheDict(t *testing.T) {
	t.Parallel()

	src := `{% set ns = namespace(a=1) %}{% do ns.update(b=2) %}{{ ns.get('b') }}{{ doc.get('x') }}{% do doc.pop('x') %}{{ doc.get('x', 'gone') }}`
	got, err := render(t.Context(), src, map[string]any{"x": "X"}, MaxRenderedBytes, time.Minute, renderMode{text: true})
	if err != nil || string(got) != "2Xgone" {
		t.Errorf("%s = %q, %v; want 2Xgone", src, got, err)
	}
}

// TestEveryBuiltinHasACost walks every test, method and global function
// Homing's and Frappe's environments register, and holds that building an
// environment refuses one without a cost.
func TestEveryBuiltinHasACost(t *testing.T) {
	t.Parallel()

	for _, env := range []*exec.Environment{templateEnv(), frappeEnv()} {
		for _, name := range env.Tests.Names() {
			if testCosts[name] == nil {
				t.Errorf("test %q has no cost", name)
			}
			fn, _ := env.Tests.Get(name)
			if _, guarded := fn.(func(*exec.Evaluator, *exec.Value, *exec.VarArgs) (bool, error)); !guarded {
				t.Errorf("test %q is not guarded", name)
			}
		}
		for _, name := range env.Context.Names() {
			v, _ := env.Context.Get(name)
			if v == nil || reflect.TypeOf(v).Kind() != reflect.Func {
				continue
			}
			if _, guarded := v.(func(*exec.Evaluator, *exec.VarArgs) *exec.Value); !guarded {
				t.Errorf("global %q is not guarded", name)
			}
		}
	}
	for _, name := range globalNames(python.Globals(time.Time{})) {
		if _, ok := globalCosts[name]; !ok {
			t.Errorf("frappe helper %q has no cost", name)
		}
	}
	mustPanic(t, "a test without a cost", func() {
		guardTests(exec.NewTestSet(map[string]exec.TestFunction{"free": func(*exec.Evaluator, *exec.Value, *exec.VarArgs) (bool, error) { return true, nil }}))
	})
	mustPanic(t, "a global without a cost", func() {
		guardGlobals(map[string]any{"free": func(*exec.Evaluator, *exec.VarArgs) *exec.Value { return nil }})
	})
	mustPanic(t, "a method without a cost", func() {
		ms := builtins.Methods
		ms.Str = exec.NewMethodSet(map[string]exec.Method[string]{"free": func(string, *exec.Value, *exec.VarArgs) (any, error) { return nil, nil }})
		checkMethodCosts(ms)
	})
	checkMethodCosts(builtins.Methods)
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("registered %s", what)
		}
	}()
	f()
}

// TestWorkBytesAreAnUpperBound measures what searching a list allocates
// (an exec.Value for every item met) and holds compareItemBytes above it.
func TestWorkBytesAreAnUpperBound(t *testing.T) {
	const n = 100_000
	list := exec.AsValue(make([]any, n))
	for i := range n {
		list.Val.Index(i).Set(reflect.ValueOf("x"))
	}
	needle := exec.AsValue("y")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	found := list.Contains(needle)
	runtime.ReadMemStats(&after)
	built := int(after.TotalAlloc - before.TotalAlloc)
	if found || n*compareItemBytes < built {
		t.Errorf("searching %d items allocated %d bytes (%d an item), more than compareItemBytes (%d)", n, built, built/n, compareItemBytes)
	}
	t.Logf("searching %d items allocated %d bytes (%d an item)", n, built, built/n)
}

// TestMethodCallsDoNotCopyTheReceiver: doc.get on a document of a thousand
// fields neither copies the document nor prints it (upstream did both on
// every call, and no limit saw either).
func TestMethodCallsDoNotCopyTheReceiver(t *testing.T) {
	const maxAlloc = 16 << 20
	doc := map[string]any{"x": "X"}
	for i := range 1000 {
		doc[fmt.Sprint("k", i)] = strings.Repeat("v", 20)
	}
	src := `{% for i in range(200) %}{{ doc.get('x') }}{% endfor %}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body, err := render(t.Context(), src, doc, MaxRenderedBytes, time.Minute, renderMode{text: true})
	runtime.ReadMemStats(&after)
	if err != nil || string(body) != strings.Repeat("X", 200) {
		t.Fatalf("%s = %.20q…, %v", src, body, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxAlloc {
		t.Errorf("rendering allocated %d MiB, want under %d MiB", alloc>>20, maxAlloc>>20)
	}
}
