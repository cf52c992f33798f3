package condition

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
)

// The allow-list of what a Python condition can run. Every function,
// method and operator a condition reaches is here with its cost, charged to
// the evaluation's budget before the call builds anything; pyEnv exposes
// only these, the compiler refuses any other method, and
// TestPythonEnvironmentHasACostForEverythingExposed walks the environment
// to hold the two together. Time is bounded by Starlark's step counter and
// by the deadline cancelling the thread; no single call here runs long,
// since what would (parsing a megabyte of digits, multiplying huge
// integers) is refused first.

// pyMaxIntDigits is Python's own limit on converting between an int and
// decimal text (sys.get_int_max_str_digits(), since 3.11): the conversion
// is quadratic in the number of digits.
const pyMaxIntDigits = 4300

// pyMaxIntBits caps the integers a condition's arithmetic builds (about
// 39,000 digits): past it, multiplication costs more than a step should.
const pyMaxIntBits = 1 << 17

// pyCost charges the budget for a call of a built-in with args, before
// the call.
type pyCost func(b *budget.Budget, args starlark.Tuple) error

// pyBuiltin is an exposed function: its cost and its implementation.
type pyBuiltin struct {
	cost pyCost
	call func(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)
}

// chargedInside is the cost of the operator helpers, which charge each
// operation themselves once they know which one it is.
func chargedInside(*budget.Budget, starlark.Tuple) error { return nil }

func pyFree(*budget.Budget, starlark.Tuple) error { return nil }

// pyBuiltins are the functions a condition calls, by name.
var pyBuiltins = map[string]pyBuiltin{
	"len":        {pyFree, universe("len")},
	"int":        {intCost, universe("int")},
	"float":      {pyFree, universe("float")}, // a float is 8 bytes; parsing is linear
	"str":        {strCost, universe("str")},
	"nowdate":    {helperCost, pyHelper},
	"now":        {helperCost, pyHelper},
	"getdate":    {helperCost, pyHelper},
	"add_days":   {helperCost, pyHelper},
	"date_diff":  {helperCost, pyHelper},
	"flt":        {helperCost, pyHelper},
	"cint":       {helperCost, pyHelper},
	"cstr":       {helperCost, pyHelper},
	pyOpName:     {chargedInside, pyOp},
	pyMethodName: {chargedInside, pyMethod},
	pySlicedName: {chargedInside, pySliced},
}

// universe is Starlark's own built-in name, to be called after its cost.
func universe(name string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	fn := starlark.Universe[name].(*starlark.Builtin)
	return func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return fn.CallInternal(thread, args, kwargs)
	}
}

// newPyBuiltin is the only way a function enters the environment: it
// charges the function's cost, and spends a step of the budget (which
// reads the clock and, now and then, the heap), before every call.
func newPyBuiltin(name string) *starlark.Builtin {
	p, ok := pyBuiltins[name]
	if !ok {
		panic("condition: built-in " + name + " has no cost") // the table is constant: a programming error
	}
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		b := budgetOf(thread)
		if err := b.Step(); err != nil {
			return nil, err
		}
		if err := p.cost(b, args); err != nil {
			return nil, err
		}
		return p.call(thread, fn, args, kwargs)
	})
}

func budgetOf(thread *starlark.Thread) *budget.Budget {
	return thread.Local("homing:budget").(*budget.Budget)
}

// pyMethodCosts are the methods a condition may call, with their costs;
// recv is the value the method is called on.
var pyMethodCosts = map[string]func(b *budget.Budget, recv starlark.Value, args starlark.Tuple) error{
	"get":        func(*budget.Budget, starlark.Value, starlark.Tuple) error { return nil }, // what it reads is charged by the document
	"startswith": func(*budget.Budget, starlark.Value, starlark.Tuple) error { return nil },
	"endswith":   func(*budget.Budget, starlark.Value, starlark.Tuple) error { return nil },
	"lower":      caseCost,
	"upper":      caseCost,
	// Starlark's strip returns a substring sharing the string's bytes.
	"strip":  func(*budget.Budget, starlark.Value, starlark.Tuple) error { return nil },
	"lstrip": func(*budget.Budget, starlark.Value, starlark.Tuple) error { return nil },
	"rstrip": func(*budget.Budget, starlark.Value, starlark.Tuple) error { return nil },
}

// caseCost is the size of s.lower() or s.upper(): its length, half as
// much again when it has non-ASCII letters whose other case is longer.
func caseCost(b *budget.Budget, recv starlark.Value, _ starlark.Tuple) error {
	s, ok := recv.(starlark.String)
	if !ok {
		return nil
	}
	n := len(s)
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			n += n / 2
			break
		}
	}
	return b.Alloc(n)
}

const (
	pyMethodName = "__homing_method"
	pySlicedName = "__homing_sliced"
)

// pyMethod calls recv.name(args...) after charging the method's cost; the
// compiler rewrites every method call into a call of it.
func pyMethod(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) < 2 {
		return nil, errors.New("internal: method call without a receiver")
	}
	name, _ := starlark.AsString(args[0])
	recv, rest := args[1], args[2:]
	cost, ok := pyMethodCosts[name]
	if !ok {
		return nil, fmt.Errorf("the method .%s() is not allowed", name)
	}
	if err := cost(budgetOf(thread), recv, rest); err != nil {
		return nil, err
	}
	var m starlark.Value
	if ha, ok := recv.(starlark.HasAttrs); ok {
		var err error
		if m, err = ha.Attr(name); err != nil {
			return nil, err
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%s has no method .%s()", recv.Type(), name)
	}
	return starlark.Call(thread, m, rest, kwargs)
}

// pySliced charges a slice of x (at most x's size) and returns x, which
// the slice expression it stands in then slices.
func pySliced(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, errors.New("internal: slice takes 1 argument")
	}
	if err := budgetOf(thread).Alloc(sizeOf(args[0])); err != nil {
		return nil, err
	}
	return args[0], nil
}

// intCost refuses int(s) on more than Python's pyMaxIntDigits digits in a
// base that is not a power of two (those convert in linear time, and
// Python does not limit them either), and charges the int built.
func intCost(b *budget.Budget, args starlark.Tuple) error {
	if len(args) == 0 {
		return nil
	}
	s, ok := args[0].(starlark.String)
	if !ok {
		return nil
	}
	base := 10
	if len(args) > 1 {
		if n, err := starlark.AsInt32(args[1]); err == nil {
			base = n
		}
	}
	digits := strings.TrimLeft(strings.TrimSpace(string(s)), "+-")
	if base == 0 {
		base = 10 // int(s, 0) reads decimal unless s has a prefix
		if len(digits) > 1 && digits[0] == '0' && strings.ContainsRune("xXoObB", rune(digits[1])) {
			base = 16 // or 8 or 2: a power of two either way
		}
	}
	if base&(base-1) != 0 && len(digits) > pyMaxIntDigits {
		//lint:ignore ST1005 Python's own message, word for word
		return fmt.Errorf("Exceeds the limit (%d digits) for integer string conversion: value has %d digits", pyMaxIntDigits, len(digits))
	}
	return b.Alloc(len(digits)/2 + 8)
}

// strCost charges str(x): its text, refused for an int past Python's
// digit limit.
func strCost(b *budget.Budget, args starlark.Tuple) error {
	if len(args) != 1 {
		return nil
	}
	if _, isString := args[0].(starlark.String); isString {
		return nil // str(s) is s
	}
	n, err := pyTextSize(args[0], false, b.MaxValue())
	if err != nil {
		return err
	}
	return b.Alloc(n)
}

// helperCost charges a frappe.utils helper the text of its arguments,
// which it reads as text and may return (cstr).
func helperCost(b *budget.Budget, args starlark.Tuple) error {
	total := 0
	for _, a := range args {
		n, err := pyTextSize(a, false, b.MaxValue())
		if err != nil {
			return err
		}
		total = budget.AddSize(total, n)
	}
	return b.Alloc(total)
}

// errIntDigits is Python's refusal of str() on an int of too many digits.
//
//lint:ignore ST1005 Python's own message, word for word
var errIntDigits = fmt.Errorf("Exceeds the limit (%d digits) for integer string conversion", pyMaxIntDigits)

// pyTextSize bounds the bytes of str(v) (repr(v) when repr, as items of a
// list are written), without building it; it stops counting past left.
func pyTextSize(v starlark.Value, repr bool, left int) (int, error) {
	switch x := v.(type) {
	case starlark.String:
		if repr {
			return budget.AddSize(budget.MulSize(len(x), 4), 2), nil // \xNN is the longest escape per byte
		}
		return len(x), nil
	case starlark.Int:
		if _, ok := x.Int64(); ok {
			return 20, nil
		}
		digits := int(float64(x.BigInt().BitLen())*math.Log10(2)) + 1
		if digits > pyMaxIntDigits {
			return 0, errIntDigits
		}
		return digits + 1, nil
	case starlark.Float:
		return 32, nil
	case starlark.Bool, starlark.NoneType:
		return 5, nil
	case starlark.Indexable: // lists and tuples
		n := 2
		for i := range x.Len() {
			m, err := pyTextSize(x.Index(i), true, left)
			if err != nil {
				return 0, err
			}
			if n = budget.AddSize(n, m+2); n > left {
				return n, nil
			}
		}
		return n, nil
	case *pyDoc:
		return len(x.String()), nil
	}
	return 64, nil
}

// intBits is the size of an int in bits (64 for one that fits an int64).
func intBits(v starlark.Value) int {
	x, ok := v.(starlark.Int)
	if !ok {
		return 0
	}
	if _, small := x.Int64(); small {
		return 64
	}
	return x.BigInt().BitLen()
}

// opCost charges what x op y builds, before it is built: strings and
// lists joined or repeated, text formatted with %, and integers, whose
// growth by repeated multiplication is capped at pyMaxIntBits.
func opCost(b *budget.Budget, op syntax.Token, x, y starlark.Value) error {
	if format, isFormat := x.(starlark.String); isFormat && op == syntax.PERCENT {
		n, err := formatCost(string(format), y, b.MaxValue())
		if err != nil {
			return err
		}
		return b.Alloc(n)
	}
	switch op {
	case syntax.STAR:
		if n, ok := sizeOfRepeat(x, y); ok {
			return b.Alloc(n)
		}
	case syntax.PLUS:
		if n := sizeOf(x) + sizeOf(y); n > 0 {
			return b.Alloc(n)
		}
	}
	bx, by := intBits(x), intBits(y)
	if bx == 0 || by == 0 || bx+by <= 128 {
		return nil
	}
	var bits int
	switch op {
	case syntax.PLUS, syntax.MINUS:
		bits = max(bx, by) + 1
	case syntax.STAR:
		bits = bx + by
	default: // //, %: no larger than x
		bits = bx
	}
	if bits > pyMaxIntBits {
		return b.Fail(budget.OverLimit("an integer of %d bits would be larger than the limit of %d bits (about 39,000 digits)", bits, pyMaxIntBits))
	}
	return b.Alloc(bits / 8)
}

// formatCost bounds the size of format % args: the format and the text of
// every argument (their repr when the format has %r).
func formatCost(format string, args starlark.Value, left int) (int, error) {
	repr := strings.Contains(format, "%r")
	items := starlark.Tuple{args}
	if t, ok := args.(starlark.Tuple); ok {
		items = t
	}
	n := len(format)
	for _, a := range items {
		m, err := pyTextSize(a, repr, left)
		if err != nil {
			return 0, err
		}
		if n = budget.AddSize(n, m); n > left {
			return n, nil
		}
	}
	return n, nil
}
