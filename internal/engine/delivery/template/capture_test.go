package template

import (
	"errors"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/gonja/builtins"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// literal60K is the 60 KB literal of issue 25's reproduction: big, but
// under MaxSourceBytes.
var literal60K = strings.Repeat("x", 60_000)

// doubling is issue 25's doubling capture, unrolled: each {% set %} writes
// the previous value twice.
var doubling = `{% set a %}` + strings.Repeat("y", 1000) + `{% endset %}` + strings.Repeat(`{% set a %}{{ a }}{{ a }}{% endset %}`, 24) + `{{ a | length }}`

// nearCap is a capture just under the 1 MiB value cap.
var nearCap = `{% set a %}{% for i in range(17) %}` + literal60K + `{% endfor %}{% endset %}`

// captureTemplates are issue 25's reproductions: captures that were not
// charged, and filters whose cost was not known before they ran. Each must
// stop at a limit, in Homing's and in Frappe's mode, without building much.
var captureTemplates = []struct {
	name, src, want string
}{
	{"CaptureLoop", `{% set b %}{% for i in range(doc.n) %}` + literal60K + `{% endfor %}{% endset %}{{ b | length }}`, "size limit"},
	{"CaptureDoubling", doubling, "limit"},
	{"FilterBlockLoop", `{% filter upper %}{% for i in range(doc.n) %}` + literal60K + `{% endfor %}{% endfilter %}`, "size limit"},
	{"ListOfCapture", nearCap + `{{ a | list | length }}`, "limit"},
	{"ListOfRepeat", `{{ ('x' * 1000000) | list | length }}`, "limit"},
	{"UrlizeCapture", nearCap + `{% for i in range(100) %}{{ a | urlize | length }}{% endfor %}`, "limit"},
	{"WordwrapCapture", nearCap + `{% for i in range(100) %}{{ a | wordwrap(3) | length }}{% endfor %}`, "limit"},
	{"StriptagsCapture", nearCap + `{% for i in range(1000) %}{{ a | striptags | length }}{% endfor %}`, "limit"},
	{"CapturesInALoop", `{% for i in range(doc.n) %}{% set b %}` + literal60K + `{% endset %}{% endfor %}1`, "limit"},
}

// TestHostileCapturesStopAtALimit runs issue 25's reproductions with
// n = 2500 in both modes: each stops with a limit error naming it, and the
// rendering allocates a bounded amount (measured, not timed). It is not
// parallel, so that TotalAlloc counts this rendering alone.
func TestHostileCapturesStopAtALimit(t *testing.T) {
	const maxAlloc = 64 << 20
	doc := map[string]any{"n": 2500}
	for _, tt := range captureTemplates {
		for _, frappe := range []bool{false, true} {
			name := tt.name
			if frappe {
				name += "/Frappe"
			}
			t.Run(name, func(t *testing.T) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var err error
				// The time limit out of reach: the budget, not the clock
				// of a loaded machine, must stop each of these.
				if frappe {
					_, err = RenderFrappe(tt.src, doc, MaxRenderedBytes, time.Time{}, outOfReach)
				} else {
					_, err = Render(tt.src, doc, MaxRenderedBytes, outOfReach)
				}
				runtime.ReadMemStats(&after)
				if err == nil {
					t.Fatal("rendered, want a limit")
				}
				if !errors.Is(err, budget.ErrLimit) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error = %v, want ErrLimit naming %q", err, tt.want)
				}
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxAlloc {
					t.Errorf("rendering allocated %d MiB before it stopped, want under %d MiB", alloc>>20, maxAlloc>>20)
				} else {
					t.Logf("allocated %.1f MiB: %v", float64(alloc)/(1<<20), err)
				}
			})
		}
	}
}

// TestArithmeticErrors holds Python's rules where Go's would wrap or give
// a number: division and modulo by zero, and integers past 64 bits, are
// errors, not -9223372036854775808 or +Inf.
func TestArithmeticErrors(t *testing.T) {
	t.Parallel()

	for src, want := range map[string]string{
		`{{ 1 // 0 }}`:                   "division by zero",
		`{{ 1 % 0 }}`:                    "modulo by zero",
		`{{ 1 / 0 }}`:                    "division by zero",
		`{{ 1.5 // 0 }}`:                 "division by zero",
		`{{ 1.5 % 0.0 }}`:                "modulo by zero",
		`{{ 9223372036854775807 * 2 }}`:  "integer overflow",
		`{{ 9223372036854775807 + 1 }}`:  "integer overflow",
		`{{ -9223372036854775807 - 2 }}`: "integer overflow",
		`{{ 10 ** 400 }}`:                "integer overflow", `{{ 10.0 ** 400 }}`: "too large",
		`{{ doc.n // doc.z }}`:                   "division by zero",
		`{{ 9223372036854775807 // -1 }}`:        "",
		`{{ (-9223372036854775807 - 1) // -1 }}`: "integer overflow",
	} {
		_, err := untimedRender(src, map[string]any{"n": 1.0, "z": 0.0}, 0)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", src, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want ErrUnbuildable naming %q", src, err, want)
		}
	}
	for src, want := range map[string]string{
		`{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 3 * 4 }}`: "3 -4 1 2 -2 1024 3.5 12",
	} {
		got, err := render(t.Context(), src, nil, MaxRenderedBytes, MaxRenderTime, renderMode{text: true})
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}

// TestEveryFilterHasACost walks every filter Homing's and Frappe's
// environments register, and holds that buildEnv refuses one without a
// cost.
func TestEveryFilterHasACost(t *testing.T) {
	t.Parallel()

	names := append(slices.Clone(templateFilters), slices.Collect(maps.Keys(python.Filters()))...)
	for _, name := range names {
		if filterCosts[name] == nil {
			t.Errorf("filter %q has no cost", name)
		}
		if !templateEnv().Filters.Exists(name) && !frappeEnv().Filters.Exists(name) {
			t.Errorf("filter %q is not registered", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("buildEnv registered a filter without a cost")
		}
	}()
	buildEnv(map[string]exec.FilterFunction{"free": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return in }}, nil)
}

// TestNodeBytesIsAnUpperBound measures what a list of one-letter strings
// (|list on a string, the cheapest item a template can make) takes, and
// holds that what a filter is charged before it runs (itemBytes an item)
// and after (the walk of its result) is at least that.
func TestNodeBytesIsAnUpperBound(t *testing.T) {
	const n = 100_000
	in := exec.AsValue(strings.Repeat("x", n))
	list, _ := builtins.Filters.Get("list")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := list(nil, in, exec.NewVarArgs())
	runtime.ReadMemStats(&after)
	built := int(after.TotalAlloc - before.TotalAlloc)
	w := sizeWalk{left: 1 << 40}
	w.walk(reflect.ValueOf(out), 0)
	if charged := n*itemBytes + w.memory(); charged < built {
		t.Errorf("|list is charged %d bytes (before and after it runs) for a list that took %d (%d an item)", charged, built, built/n)
	}
	t.Logf("list of %d one-letter strings: built %d bytes (%d an item), walk charges %d, pre-charge %d", n, built, built/n, w.memory(), n*itemBytes)
}
