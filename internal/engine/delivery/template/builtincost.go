package template

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"slices"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// This file is the allow-list, with the cost of each, of everything a
// template reaches besides filters (filtercost.go): operators whose work
// grows with their operands, conversions that copy a value whole, tests,
// methods and global functions. buildEnv refuses an environment that
// holds a test, method or global without an entry here.

const (
	// walkItemsPerStep is how many items (list items, map entries) a
	// comparison or a copy handles per step: each costs a reflect walk
	// and a small allocation, about 100 ns.
	walkItemsPerStep = 8
	// compareItemBytes is what comparing or searching allocates per item
	// it meets (an exec.Value and its boxed reflect.Value), measured by
	// TestWorkBytesAreAnUpperBound.
	compareItemBytes = 64
)

// walkSize is v's node count and string bytes, walked no further than
// the budget could pay for.
func (l *renderLimits) walkSize(v *exec.Value) (nodes, text int) {
	if v.IsString() {
		return 1, len(v.String())
	}
	w := sizeWalk{left: min(l.BytesLeft()+1, budget.MulSize(l.StepsLeft()+1, walkItemsPerStep*nodeBytes))}
	w.walk(reflect.ValueOf(v), 0)
	return w.nodes, max(0, w.size-w.nodes*textNodeBytes)
}

// Work charges what a comparison, a membership test or a whole-value copy
// will cost before the engine does it (exec.Limits).
func (l *renderLimits) Work(op string, operands ...*exec.Value) error {
	steps, bytes := workCost(l, op, operands...)
	if err := l.Charge(steps); err != nil {
		return err
	}
	return l.Hold(0, bytes)
}

func workCost(l *renderLimits, op string, operands ...*exec.Value) (steps, bytes int) {
	if op == "copy" {
		if operands[0].IsString() {
			// Converted to runes, four bytes a character.
			n := len(operands[0].String())
			return 1 + n/fastTextBytes, budget.MulSize(n, 4)
		}
		// ToGoSimpleType rebuilds every list and map, item by item.
		nodes, _ := l.walkSize(operands[0])
		return 1 + nodes/walkItemsPerStep, budget.MulSize(nodes, itemBytes)
	}
	if op == "in" && len(operands) == 2 && isGoMap(operands[1]) && !operands[0].IsList() && !operands[0].IsDict() {
		return 1 + len(operands[0].String())/fastTextBytes, 0 // a key lookup; a dict literal is searched
	}
	steps = 1
	for _, v := range operands {
		if v == nil {
			continue
		}
		if v.IsString() {
			steps = budget.AddSize(steps, len(v.String())/fastTextBytes)
			continue
		}
		if !v.IsList() && !v.IsDict() {
			continue
		}
		nodes, text := l.walkSize(v)
		steps = budget.AddSize(steps, nodes/walkItemsPerStep+text/fastTextBytes)
		bytes = budget.AddSize(bytes, budget.MulSize(nodes, compareItemBytes))
	}
	return steps, bytes
}

// isGoMap reports whether v holds a Go map, whose keys are looked up, not
// searched.
func isGoMap(v *exec.Value) bool {
	r := v.Val
	for r.IsValid() && (r.Kind() == reflect.Interface || r.Kind() == reflect.Pointer) && !r.IsNil() {
		r = r.Elem()
	}
	return r.IsValid() && r.Kind() == reflect.Map
}

// templateCost is what a test, method or global function will cost,
// worked out from its receiver (nil for a global) and arguments before it
// runs; what it returns is charged again after (Result), unless the cost
// is exact (prepaid).
type templateCost func(l *renderLimits, self *exec.Value, args *exec.VarArgs) (steps, bytes int)

func flatBuiltin(*renderLimits, *exec.Value, *exec.VarArgs) (int, int) { return 1, 0 }

// textBuiltin charges a step per fastTextBytes of its receiver and
// arguments as text, and their bytes (the copy most text methods make).
func textBuiltin(l *renderLimits, self *exec.Value, args *exec.VarArgs) (int, int) {
	n := 0
	if self != nil {
		n = l.textSize(self)
	}
	if args != nil {
		for _, a := range args.Args {
			n = budget.AddSize(n, l.textSize(a))
		}
		for _, a := range args.KwArgs {
			n = budget.AddSize(n, l.textSize(a))
		}
	}
	return 1 + n/fastTextBytes, n
}

// compareBuiltin is a comparison test: the work of comparing its input
// with its first argument.
func compareBuiltin(l *renderLimits, self *exec.Value, args *exec.VarArgs) (int, int) {
	operands := []*exec.Value{self}
	if args != nil && len(args.Args) > 0 {
		operands = append(operands, args.Args[0])
	}
	return workCost(l, "==", operands...)
}

// itemsBuiltin walks its receiver's items; sortedBuiltin sorts them.
func itemsBuiltin(_ *renderLimits, self *exec.Value, _ *exec.VarArgs) (int, int) {
	n := itemCount(self)
	return 1 + n, budget.MulSize(n, itemBytes)
}

func sortedBuiltin(_ *renderLimits, self *exec.Value, _ *exec.VarArgs) (int, int) {
	n := itemCount(self)
	return 1 + budget.MulSize(n, bits.Len(uint(n))+1), budget.MulSize(n, itemBytes)
}

// argItemsBuiltin walks its first argument's items (dict.update).
func argItemsBuiltin(l *renderLimits, _ *exec.Value, args *exec.VarArgs) (int, int) {
	n := len(args.KwArgs)
	for _, a := range args.Args {
		n = budget.AddSize(n, itemCount(a))
	}
	return 1 + n, budget.MulSize(n, itemBytes)
}

// testCosts is the allow-list of Jinja tests with the cost of each.
var testCosts = map[string]templateCost{
	"boolean": flatBuiltin, "callable": flatBuiltin, "defined": flatBuiltin, "divisibleby": flatBuiltin,
	"even": flatBuiltin, "false": flatBuiltin, "filter": flatBuiltin, "float": flatBuiltin,
	"ge": flatBuiltin, ">=": flatBuiltin, "gt": flatBuiltin, "greaterthan": flatBuiltin, ">": flatBuiltin,
	"integer": flatBuiltin, "iterable": flatBuiltin, "le": flatBuiltin, "<=": flatBuiltin,
	"lt": flatBuiltin, "lessthan": flatBuiltin, "<": flatBuiltin, "mapping": flatBuiltin,
	"none": flatBuiltin, "number": flatBuiltin, "odd": flatBuiltin, "sameas": flatBuiltin,
	"sequence": flatBuiltin, "string": flatBuiltin, "test": flatBuiltin, "true": flatBuiltin,
	"undefined": flatBuiltin,
	// Tests that compare their input with an argument, or search it.
	"eq": compareBuiltin, "equalto": compareBuiltin, "==": compareBuiltin,
	"ne": compareBuiltin, "!=": compareBuiltin,
	"in": func(l *renderLimits, self *exec.Value, args *exec.VarArgs) (int, int) {
		if args == nil || len(args.Args) == 0 {
			return 1, 0
		}
		return workCost(l, "in", self, args.Args[0])
	},
	// Tests that build a lowered, uppered or escaped copy of their input.
	"lower": textBuiltin, "upper": textBuiltin, "escaped": textBuiltin,
}

// methodCosts is the allow-list of methods, by receiver kind, with the
// cost of each; Method (limits.go) also bounds the ones whose result grows
// with an argument.
var methodCosts = map[string]map[string]templateCost{
	"str": {
		"capitalize": textBuiltin, "capwords": textBuiltin, "casefold": textBuiltin, "center": textBuiltin,
		"count": textBuiltin, "encode": textBuiltin, "endswith": textBuiltin, "expandtabs": textBuiltin,
		"find": textBuiltin, "format": textBuiltin, "format_map": textBuiltin, "isalnum": textBuiltin,
		"isalpha": textBuiltin, "isascii": textBuiltin, "isdecimal": textBuiltin, "isdigit": textBuiltin,
		"islower": textBuiltin, "isnumeric": textBuiltin, "isprintable": textBuiltin, "isspace": textBuiltin,
		"istitle": textBuiltin, "isupper": textBuiltin, "join": textBuiltin, "ljust": textBuiltin,
		"lower": textBuiltin, "lstrip": textBuiltin, "partition": textBuiltin, "removeprefix": textBuiltin,
		"removesuffix": textBuiltin, "replace": textBuiltin, "rfind": textBuiltin, "rjust": textBuiltin,
		"rpartition": textBuiltin, "rsplit": textBuiltin, "rstrip": textBuiltin, "split": textBuiltin,
		"splitlines": textBuiltin, "startswith": textBuiltin, "strip": textBuiltin, "swapcase": textBuiltin,
		"title": textBuiltin, "upper": textBuiltin, "zfill": textBuiltin,
	},
	"int":   {"is_integer": flatBuiltin, "bit_length": flatBuiltin, "bit_count": flatBuiltin, "as_integer_ratio": flatBuiltin},
	"float": {"is_integer": flatBuiltin, "as_integer_ratio": flatBuiltin, "hex": flatBuiltin},
	"bool": {
		"string": flatBuiltin, "int": flatBuiltin, "bit_length": flatBuiltin, "bit_count": flatBuiltin,
		"as_integer_ratio": flatBuiltin,
	},
	// A dict's or list's receiver copy, when the engine makes one, is
	// charged by Work("copy").
	"dict": {
		"get": flatBuiltin, "pop": flatBuiltin, "setdefault": flatBuiltin, "clear": itemsBuiltin,
		"keys": sortedBuiltin, "values": sortedBuiltin, "items": sortedBuiltin, "copy": itemsBuiltin,
		"update": argItemsBuiltin,
	},
	"list": {"append": flatBuiltin, "reverse": itemsBuiltin, "copy": itemsBuiltin},
}

// methodKind names the method set a receiver's methods come from, as
// evalMethod picks it.
func methodKind(self *exec.Value) string {
	switch {
	case self.IsString():
		return "str"
	case self.IsBool():
		return "bool"
	case self.IsFloat():
		return "float"
	case self.IsInteger():
		return "int"
	case self.IsDict():
		return "dict"
	case self.IsList():
		return "list"
	}
	return ""
}

// checkMethodCosts panics unless every method of ms has a cost.
func checkMethodCosts(ms exec.Methods) {
	for kind, names := range map[string][]string{
		"str": ms.Str.Names(), "int": ms.Int.Names(), "float": ms.Float.Names(), "bool": ms.Bool.Names(),
		"dict": ms.Dict.Names(), "list": ms.List.Names(),
	} {
		for _, name := range names {
			if methodCosts[kind][name] == nil {
				panic(fmt.Sprintf("method %s.%s has no cost in methodCosts: a method that does not charge the budget cannot be registered", kind, name))
			}
		}
	}
}

// guardTests is tests with each guarded by its cost; it panics on a test
// without one.
func guardTests(tests *exec.TestSet) *exec.TestSet {
	guarded := map[string]exec.TestFunction{}
	for _, name := range tests.Names() {
		cost := testCosts[name]
		if cost == nil {
			panic("test " + name + " has no cost in testCosts: a test that does not charge the budget cannot be registered")
		}
		fn, _ := tests.Get(name)
		guarded[name] = guardTest(cost, fn)
	}
	return exec.NewTestSet(guarded)
}

var typeOfContext = reflect.TypeFor[*exec.Context]()

// guardTest charges a test's cost before it runs; fn takes an
// *exec.Evaluator or an *exec.Context first, as gonja allows.
func guardTest(cost templateCost, fn exec.TestFunction) func(*exec.Evaluator, *exec.Value, *exec.VarArgs) (bool, error) {
	f := reflect.ValueOf(fn)
	byContext := f.Type().In(0) == typeOfContext
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
		if l := limitsOf(e); l != nil {
			steps, bytes := cost(l, in, params)
			if err := l.Charge(steps); err != nil {
				return false, err
			}
			if err := l.Hold(0, bytes); err != nil {
				return false, err
			}
		}
		first := reflect.ValueOf(e)
		if byContext {
			first = reflect.ValueOf(e.Environment.Context)
		}
		out := f.Call([]reflect.Value{first, reflect.ValueOf(in), reflect.ValueOf(params)})
		err, _ := out[1].Interface().(error)
		return out[0].Bool(), err
	}
}

// globalCost is a global function's cost, and whether it is exact: an
// exact cost has paid for the function's result, which is not charged
// again.
type globalCost struct {
	cost  templateCost
	exact bool
}

// globalCosts is the allow-list of global functions with the cost of
// each. A function a global returns (cycler's next and reset, joiner's
// call) does constant work and is charged a step and its result as any
// call is.
var globalCosts = map[string]globalCost{
	"cycler": {cost: argItemsBuiltin}, "dict": {cost: argItemsBuiltin}, "namespace": {cost: argItemsBuiltin},
	"joiner": {cost: flatBuiltin}, "_": {cost: flatBuiltin}, "gettext": {cost: flatBuiltin},
	"ngettext": {cost: flatBuiltin}, "lipsum": {cost: lipsumCost}, "range": {cost: rangeCost, exact: true},
	// Frappe's helpers (python.Utils): they read their arguments as text.
	"nowdate": {cost: flatBuiltin}, "now": {cost: flatBuiltin}, "getdate": {cost: textBuiltin},
	"add_days": {cost: textBuiltin}, "date_diff": {cost: textBuiltin}, "format_date": {cost: textBuiltin},
	"format_datetime": {cost: textBuiltin}, "fmt_money": {cost: textBuiltin}, "format_value": {cost: textBuiltin},
	"flt": {cost: textBuiltin}, "cint": {cost: textBuiltin}, "cstr": {cost: textBuiltin},
}

// lipsumCost bounds lipsum(n, html, min, max): n paragraphs of up to max
// words.
func lipsumCost(_ *renderLimits, _ *exec.Value, params *exec.VarArgs) (int, int) {
	n, most := intArg(params, 0, "n"), intArg(params, 3, "max")
	if n == 0 {
		n = 5
	}
	if most == 0 {
		most = 100
	}
	words := budget.MulSize(max(0, n), max(0, most))
	// More words than one value holds are refused by their bytes.
	return 1 + min(words, MaxRenderedBytes)/walkItemsPerStep, budget.MulSize(words, 16)
}

// rangeCost is range()'s list, exactly: a step and 8 bytes a number.
func rangeCost(_ *renderLimits, _ *exec.Value, params *exec.VarArgs) (int, int) {
	start, stop, step := rangeArgs(params)
	if step == 0 {
		return 1, 0
	}
	n := rangeLen(start, stop, step)
	return 1 + n, budget.MulSize(n, 8)
}

var typeOfVarArgs = reflect.TypeFor[*exec.VarArgs]()

// guardGlobals returns globals with every function, also inside nested
// maps (Frappe's utils), guarded by its cost; it panics on a function
// without one.
func guardGlobals(globals map[string]any) map[string]any {
	out := make(map[string]any, len(globals))
	for name, v := range globals {
		switch g := v.(type) {
		case map[string]any:
			out[name] = guardGlobals(g)
			continue
		case *exec.Value, nil:
			out[name] = v
			continue
		}
		if reflect.TypeOf(v).Kind() != reflect.Func {
			out[name] = v
			continue
		}
		c, ok := globalCosts[name]
		if !ok {
			panic("global function " + name + " has no cost in globalCosts: a function that does not charge the budget cannot be registered")
		}
		out[name] = guardGlobal(c, v)
	}
	return out
}

// guardGlobal turns fn, which takes (*exec.Evaluator, *exec.VarArgs) or
// ...*exec.Value and returns a value and maybe an error, into a function
// that charges its cost first.
func guardGlobal(c globalCost, fn any) func(*exec.Evaluator, *exec.VarArgs) *exec.Value {
	f := reflect.ValueOf(fn)
	t := f.Type()
	withArgs := t.NumIn() == 2 && t.In(1) == typeOfVarArgs
	if !withArgs && !(t.IsVariadic() && t.NumIn() == 1) {
		panic(fmt.Sprintf("global function of type %s cannot be guarded", t))
	}
	return func(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
		l := limitsOf(e)
		if l != nil {
			steps, bytes := c.cost(l, nil, params)
			if err := l.Charge(steps); err != nil {
				return exec.AsValue(err)
			}
			if err := l.Alloc(bytes); err != nil {
				return exec.AsValue(err)
			}
		}
		var out []reflect.Value
		if withArgs {
			out = f.Call([]reflect.Value{reflect.ValueOf(e), reflect.ValueOf(params)})
		} else {
			if len(params.KwArgs) > 0 {
				return exec.AsValue(errors.New("takes no keyword arguments"))
			}
			args := make([]reflect.Value, len(params.Args))
			for i, a := range params.Args {
				args[i] = reflect.ValueOf(a)
			}
			out = f.Call(args)
		}
		if len(out) == 2 {
			if err, _ := out[1].Interface().(error); err != nil {
				return exec.AsValue(err)
			}
		}
		v := exec.ToValue(out[0])
		if c.exact && l != nil {
			l.prepaid = v
		}
		return v
	}
}

// globalNames lists the functions of globals, nested maps included, for
// tests.
func globalNames(globals map[string]any) []string {
	var names []string
	for name, v := range globals {
		if m, ok := v.(map[string]any); ok {
			names = append(names, globalNames(m)...)
		} else if v != nil && reflect.TypeOf(v).Kind() == reflect.Func {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
