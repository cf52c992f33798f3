package template

import (
	"errors"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// withHeapPastCeiling runs fn while the process holds more heap than 90%
// of its memory limit, then restores the limit. Not parallel: the limit
// is the whole process's.
func withHeapPastCeiling(t *testing.T, fn func()) {
	t.Helper()
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	old := debug.SetMemoryLimit(48 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	fn()
	debug.SetMemoryLimit(old)
	runtime.KeepAlive(ballast)
}

// Past the process's ceiling, renderings stop with ErrOverloaded, which is
// not the definition's fault (not ErrUnbuildable): the same template
// renders once the heap has room (conditions:
// TestConditionsStopPastTheHeapCeiling).
func TestEvaluationsStopPastTheHeapCeiling(t *testing.T) {
	doc := map[string]any{"s": strings.Repeat("x", 1024)}
	src := `{"a": "{{ doc.s * 100 }}"}`
	check := func(what string, err error, overloaded bool) {
		t.Helper()
		if overloaded && (!errors.Is(err, budget.ErrOverloaded) || errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), "ceiling")) {
			t.Errorf("%s past the ceiling: %v, want ErrOverloaded and not ErrUnbuildable", what, err)
		}
		if !overloaded && err != nil {
			t.Errorf("%s with room: %v", what, err)
		}
	}
	withHeapPastCeiling(t, func() {
		_, err := untimedRender(src, doc, 1<<20)
		check("template", err, true)
	})
	_, err := untimedRender(src, doc, 1<<20)
	check("template", err, false)
}
