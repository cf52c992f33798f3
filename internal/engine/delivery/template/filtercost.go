package template

import (
	"math/bits"
	"reflect"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// filterCost is what a filter will cost, worked out from its input and
// parameters before it runs: steps in proportion to its work, so that the
// step limit (and with it the deadline) stops a template before a long
// single call rather than after it, and the bytes of memory it will build
// on the way. What it returns is charged again after it runs (Store).
type filterCost func(l *renderLimits, in *exec.Value, params *exec.VarArgs) (steps, bytes int)

const (
	// fastTextBytes is how many bytes of input a text filter that runs
	// at memory speed (lower, trim, escape) handles per step.
	fastTextBytes = 64
	// slowTextBytes is the same for the filters that run regular
	// expressions or walk runes (urlize, striptags, title): urlize takes
	// about 100 ns a byte, and a step is budgeted about 2 µs
	// (MaxRenderTime / MaxRenderSteps).
	slowTextBytes = 8
	// itemBytes is what a filter that makes a list pays per item before it
	// runs: |list on a string allocates about 93 bytes an item, the list's
	// growth included (TestNodeBytesIsAnUpperBound).
	itemBytes = 128
)

// filterCosts is the allow-list of filters with the cost of each: buildEnv
// refuses to register a filter that has no entry here.
var filterCosts = map[string]filterCost{
	// Constant work on any input.
	"abs": flatCost, "attr": flatCost, "d": flatCost, "default": flatCost, "first": flatCost,
	"last": flatCost, "length": lengthCost, "count": lengthCost, "float": flatCost, "int": flatCost,
	"round": flatCost, "random": flatCost, "safe": flatCost, "filesizeformat": flatCost,
	// Text in, text out, at memory speed.
	"capitalize": textCost(fastTextBytes), "lower": textCost(fastTextBytes), "upper": textCost(fastTextBytes),
	"trim": textCost(fastTextBytes), "string": textCost(fastTextBytes), "escape": textCost(fastTextBytes),
	"e": textCost(fastTextBytes), "forceescape": textCost(fastTextBytes), "urlencode": textCost(fastTextBytes),
	"truncate": textCost(fastTextBytes), "wordcount": textCost(fastTextBytes), "pprint": textCost(fastTextBytes),
	"tojson": textCost(fastTextBytes), "center": textCost(fastTextBytes), "indent": textCost(fastTextBytes),
	"format": textCost(fastTextBytes), "replace": textCost(fastTextBytes), "wordwrap": textCost(fastTextBytes),
	"xmlattr": textCost(fastTextBytes),
	// Text filters that run regular expressions or walk runes.
	"title": textCost(slowTextBytes), "striptags": textCost(slowTextBytes), "urlize": textCost(slowTextBytes),
	// Filters that make a list of their input's items (a string's
	// characters) or walk them.
	"list": itemsCost, "reverse": itemsCost, "batch": itemsCost, "slice": itemsCost, "map": itemsCost,
	"select": itemsCost, "reject": itemsCost, "selectattr": itemsCost, "rejectattr": itemsCost,
	"join": itemsCost, "sum": itemsCost, "min": itemsCost, "max": itemsCost, "items": itemsCost,
	// Filters that sort or hash their input's items.
	"sort": sortCost, "dictsort": sortCost, "groupby": sortCost, "unique": sortCost,
	// Frappe's (python.Filters).
	"json": textCost(fastTextBytes), "len": lengthCost, "str": textCost(fastTextBytes), "cstr": textCost(fastTextBytes),
	"flt": flatCost, "cint": flatCost,
}

func flatCost(*renderLimits, *exec.Value, *exec.VarArgs) (int, int) { return 1, 0 }

// lengthCost is a step, and a step per fastTextBytes of a string, whose
// characters are counted.
func lengthCost(_ *renderLimits, in *exec.Value, _ *exec.VarArgs) (int, int) {
	if in.IsString() {
		return 1 + len(in.String())/fastTextBytes, 0
	}
	return 1, 0
}

// textCost charges a step per perStep bytes of the input as text, and the
// text's bytes.
func textCost(perStep int) filterCost {
	return func(l *renderLimits, in *exec.Value, _ *exec.VarArgs) (int, int) {
		n := l.textSize(in)
		return 1 + n/perStep, n
	}
}

// itemsCost charges a step and itemBytes per item of the input.
func itemsCost(_ *renderLimits, in *exec.Value, _ *exec.VarArgs) (int, int) {
	n := itemCount(in)
	return 1 + n, budget.MulSize(n, itemBytes)
}

// sortCost is itemsCost with n log n steps.
func sortCost(_ *renderLimits, in *exec.Value, _ *exec.VarArgs) (int, int) {
	n := itemCount(in)
	return 1 + budget.MulSize(n, bits.Len(uint(n))+1), budget.MulSize(n, itemBytes)
}

// itemCount is how many items a filter walking in meets: a string's bytes
// (at least its characters), a collection's length, or one.
func itemCount(in *exec.Value) int {
	v := in.Val
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() {
		return 1
	}
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Array, reflect.Map:
		return v.Len()
	}
	return 1
}

// textSize is in's size as text: a string's length, or the size of a
// collection's contents, walked no further than the budget left.
func (l *renderLimits) textSize(in *exec.Value) int {
	if in.IsString() {
		return len(in.String())
	}
	w := sizeWalk{left: l.BytesLeft() + 1}
	w.walk(reflect.ValueOf(in), 0)
	return w.size
}

// chargeFilter charges a filter's cost before it runs.
func (l *renderLimits) chargeFilter(name string, in *exec.Value, params *exec.VarArgs) error {
	cost, ok := filterCosts[name]
	if !ok {
		return l.Fail(budget.OverLimit("filter %q has no cost", name)) // buildEnv refuses such a filter
	}
	steps, bytes := cost(l, in, params)
	if err := l.Charge(steps); err != nil {
		return err
	}
	return l.Hold(0, bytes)
}
