package template

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// renderLimits bounds one rendering from inside the engine (it is the
// exec.Limits of internal/gonja): its budget counts steps, watches the
// deadline and is charged every value the template builds, before the
// value is built when its size comes from an argument. Only the rendering
// goroutine uses it, and its first error is final.
type renderLimits struct {
	*budget.Budget
	// text makes Output write values as text, not JSON (renderMode).
	text bool
	// prepaid is the result of a global whose exact cost was charged
	// before it ran (range), which Result does not charge again.
	prepaid *exec.Value
}

func newRenderLimits(ctx context.Context, limit time.Duration, maxBytes int) *renderLimits {
	return &renderLimits{Budget: budget.New(ctx, budget.Limits{
		What:     "rendering",
		Hint:     "; loops over large ranges or nested loops are too big",
		MemHint:  fmt.Sprintf(" (%d × delivery.max_payload_bytes)", RenderMemoryFactor),
		ValHint:  " (delivery.max_payload_bytes)",
		Limit:    limit,
		Steps:    MaxRenderSteps,
		Bytes:    RenderMemoryFactor * maxBytes,
		MaxValue: maxBytes,
	})}
}

// Store charges v, which a collection is about to keep, at its full size:
// lists that hold the same list twice are as big to print, compare or
// encode as if they were copies. It refuses v when v holds into, since a
// collection that contains itself never ends.
func (l *renderLimits) Store(into, v *exec.Value) error {
	if l.Err() != nil {
		return l.Err()
	}
	var self uintptr
	if into != nil {
		self = identity(into.Val)
	}
	w := sizeWalk{self: self, left: l.BytesLeft() + 1}
	w.walk(reflect.ValueOf(v), 0)
	if w.cycle {
		return l.Fail(budget.OverLimit("a value cannot be stored inside itself (a collection that contains itself never ends)"))
	}
	return l.Hold(w.size, w.memory())
}

// Result charges what a filter, global function or method built, as Store
// does.
func (l *renderLimits) Result(v *exec.Value) error {
	if err := l.Step(); err != nil {
		return err
	}
	if paid := l.prepaid; paid != nil {
		l.prepaid = nil
		if sameValue(paid, v) {
			return nil
		}
	}
	return l.Store(nil, v)
}

// sameValue reports whether a and b hold the same slice, map or pointer:
// evalCall wraps a function's result in a new exec.Value.
func sameValue(a, b *exec.Value) bool {
	x, y := a.Val, b.Val
	if !x.IsValid() || !y.IsValid() || x.Kind() != y.Kind() {
		return false
	}
	switch x.Kind() {
	case reflect.Slice:
		return x.Pointer() == y.Pointer() && x.Len() == y.Len()
	case reflect.Map, reflect.Pointer:
		return x.Pointer() == y.Pointer()
	}
	return false
}

// identity is the address of the map or pointer a value holds, which a
// collection containing it would share.
func identity(v reflect.Value) uintptr {
	for v.IsValid() && v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if !v.IsValid() {
		return 0
	}
	switch v.Kind() {
	case reflect.Map, reflect.Pointer:
		return v.Pointer()
	}
	return 0
}

const (
	// nodeBytes is what one node of a value (a list item, a map entry's
	// key or value, an exec.Value, a boxed interface) costs in memory
	// beyond its strings' bytes: a string header or interface is 16 bytes,
	// an exec.Value 32 over two nodes, a map entry's slot about 40 over
	// two. Filters also pay itemBytes an item before they run
	// (TestNodeBytesIsAnUpperBound measures the two together).
	nodeBytes = 24
	// textNodeBytes is what a node adds to a value's size as text, for the
	// cap on one value: a separator and a little punctuation.
	textNodeBytes = 8
)

// sizeWalk adds up a value's size: its strings' bytes and textNodeBytes a
// node as text (size), and nodeBytes a node in memory (memory), following
// every reference, and stops as soon as it passes left, so its cost is
// bounded by the budget it charges against.
type sizeWalk struct {
	self  uintptr
	left  int
	size  int
	mem   int
	nodes int
	cycle bool
}

// memory is what the walked value takes in memory, as an upper bound.
func (w *sizeWalk) memory() int { return w.mem }

// scalar reports whether values of kind k hold no references.
func scalar(k reflect.Kind) bool {
	return k >= reflect.Bool && k <= reflect.Complex128
}

var (
	typeOfValue        = reflect.TypeFor[exec.Value]()
	typeOfReflectValue = reflect.TypeFor[reflect.Value]()
)

func (w *sizeWalk) walk(v reflect.Value, depth int) {
	if w.memory() > w.left || w.cycle || !v.IsValid() {
		return
	}
	if depth > budget.MaxDepth {
		w.size = w.left + 1 // deeper than any document: too big
		return
	}
	w.size += textNodeBytes
	w.mem += nodeBytes
	w.nodes++
	if v.Type() == typeOfReflectValue && v.CanInterface() {
		w.walk(v.Interface().(reflect.Value), depth)
		return
	}
	switch v.Kind() {
	case reflect.Interface:
		w.walk(v.Elem(), depth)
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if w.self != 0 && v.Pointer() == w.self {
			w.cycle = true
			return
		}
		w.walk(v.Elem(), depth+1)
	case reflect.String:
		w.size += v.Len()
		w.mem += v.Len()
	case reflect.Slice, reflect.Array:
		if scalar(v.Type().Elem().Kind()) {
			// range's []int: no references to follow.
			w.size = budget.AddSize(w.size, budget.MulSize(v.Len(), textNodeBytes))
			w.mem = budget.AddSize(w.mem, budget.MulSize(v.Len(), int(v.Type().Elem().Size())))
			w.nodes = budget.AddSize(w.nodes, v.Len())
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i), depth+1)
			if w.memory() > w.left || w.cycle {
				return
			}
		}
	case reflect.Map:
		if w.self != 0 && v.Pointer() == w.self {
			w.cycle = true
			return
		}
		it := v.MapRange()
		for it.Next() {
			w.walk(it.Key(), depth+1)
			w.walk(it.Value(), depth+1)
			if w.memory() > w.left || w.cycle {
				return
			}
		}
	case reflect.Struct:
		if v.Type() == typeOfValue {
			w.walk(v.FieldByName("Val"), depth)
			return
		}
		for i := range v.NumField() {
			w.walk(v.Field(i), depth+1)
		}
	}
}

// Method checks a method call before it runs: the ones that build a value
// from an argument are charged that value's size first.
func (l *renderLimits) Method(name string, self *exec.Value, args *exec.VarArgs) error {
	if err := l.Step(); err != nil {
		return err
	}
	if cost := methodCosts[methodKind(self)][name]; cost != nil {
		steps, bytes := cost(l, self, args)
		if err := l.Charge(steps); err != nil {
			return err
		}
		if err := l.Hold(0, bytes); err != nil {
			return err
		}
	} // else gonja has no such method, and says so
	switch {
	case self.IsString():
		return l.stringMethod(name, self.String(), args)
	case self.IsList(), self.IsDict():
		switch name {
		case "append", "extend", "insert", "update", "setdefault":
			for _, a := range args.Args {
				if err := l.Store(self, a); err != nil {
					return err
				}
			}
			for _, a := range args.KwArgs {
				if err := l.Store(self, a); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (l *renderLimits) stringMethod(name, s string, args *exec.VarArgs) error {
	switch name {
	case "center", "ljust", "rjust", "zfill":
		// The fill character may take up to four bytes.
		return l.Alloc(len(s) + 4*max(0, intArg(args, 0, "width")))
	case "expandtabs":
		size := max(0, intArg(args, 0, "tabsize"))
		return l.Alloc(len(s) + strings.Count(s, "\t")*max(size, 8))
	case "format", "format_map":
		return l.Alloc(formatSize(s, args))
	case "join":
		if len(args.Args) == 0 {
			return nil
		}
		n := max(1, args.Args[0].Len())
		if err := l.Alloc(budget.MulSize(len(s), n)); err != nil {
			return err
		}
		return l.Store(nil, args.Args[0])
	case "replace":
		if len(args.Args) < 2 {
			return nil
		}
		count := -1
		if len(args.Args) > 2 && args.Args[2].IsInteger() {
			count = args.Args[2].Integer()
		}
		return l.Alloc(replaceSize(s, args.Args[0].String(), args.Args[1].String(), count))
	}
	return nil
}

// intArg reads the integer argument at position i or named name, 0 when
// there is none.
func intArg(args *exec.VarArgs, i int, name string) int {
	if args == nil {
		return 0
	}
	if v, ok := args.KwArgs[name]; ok && v.IsNumber() {
		return v.Integer()
	}
	if i < len(args.Args) && args.Args[i].IsNumber() {
		return args.Args[i].Integer()
	}
	return 0
}

// replaceSize is the length of strings.Replace(s, old, new, count).
func replaceSize(s, old, new string, count int) int {
	n := 0
	if old == "" {
		n = len(s) + 1
	} else {
		n = strings.Count(s, old)
	}
	if count >= 0 && count < n {
		n = count
	}
	grow := len(new) - len(old)
	if grow <= 0 {
		return len(s)
	}
	return budget.AddSize(len(s), budget.MulSize(n, grow))
}

// formatSize bounds what a format string makes of its arguments: every
// number in it may be a width, and every argument may be printed whole.
func formatSize(format string, args *exec.VarArgs) int {
	size := len(format)
	for i := 0; i < len(format); i++ {
		if format[i] < '0' || format[i] > '9' {
			continue
		}
		n := 0
		for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
			n = budget.AddSize(budget.MulSize(n, 10), int(format[i]-'0'))
		}
		size = budget.AddSize(size, n)
	}
	if args != nil {
		for _, a := range args.Args {
			size = budget.AddSize(size, len(a.String()))
			if a.IsNumber() {
				// A '*' width takes its value from an argument.
				size = budget.AddSize(size, max(0, a.Integer()))
			}
		}
		for _, a := range args.KwArgs {
			size = budget.AddSize(size, len(a.String()))
		}
	}
	return size
}

// Output writes the value of a {{ }} expression, escaped for where it
// lands in the JSON body.
func (l *renderLimits) Output(w io.Writer, v *exec.Value) error {
	if err := l.Step(); err != nil {
		return err
	}
	if l.text {
		out := python.Str(v)
		if err := l.Alloc(len(out)); err != nil {
			return err
		}
		_, err := io.WriteString(w, out)
		return err
	}
	inString := true
	if body, ok := w.(*bodyWriter); ok {
		inString = body.inString
	}
	var out []byte
	var err error
	if inString {
		out, err = jsonStringContent(v)
	} else {
		out, err = jsonValueOf(v)
	}
	if err != nil {
		return l.Fail(err)
	}
	_, err = w.Write(out)
	return err
}

// Capture is the buffer a block renders into ({% set %}…{% endset %},
// {% filter %}): each write costs a step and is charged before it is
// copied, with every backing array the buffer grows into, and the buffer
// refuses to hold more than one value may (delivery.max_payload_bytes).
func (l *renderLimits) Capture() exec.Capture { return &captureBuffer{limits: l} }

type captureBuffer struct {
	limits *renderLimits
	buf    []byte
}

func (c *captureBuffer) Write(p []byte) (int, error) {
	if err := c.limits.Step(); err != nil {
		return 0, err
	}
	need := budget.AddSize(len(c.buf), len(p))
	if need > c.limits.MaxValue() {
		return 0, c.limits.Fail(budget.OverLimit("a block captures more than the size limit of %d bytes (delivery.max_payload_bytes)", c.limits.MaxValue()))
	}
	if need > cap(c.buf) {
		grown := min(max(need, 2*cap(c.buf), 64), c.limits.MaxValue())
		if err := c.limits.Alloc(grown); err != nil {
			return 0, err
		}
		c.buf = append(make([]byte, 0, grown), c.buf...)
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// String is the captured text; the copy is charged too (its refusal stops
// the rendering at its next step).
func (c *captureBuffer) String() string {
	_ = c.limits.Alloc(len(c.buf))
	return string(c.buf)
}

// limitsOf finds the rendering's limits, nil outside a limited rendering.
func limitsOf(e *exec.Evaluator) *renderLimits {
	if e == nil || e.Environment == nil {
		return nil
	}
	l, _ := e.Environment.Limits.(*renderLimits)
	return l
}

// bodyWriter collects the rendered body up to the size limit, and follows
// the JSON text written so far well enough to know whether the next value
// lands inside a string.
type bodyWriter struct {
	limits   *renderLimits
	buf      []byte
	inString bool
	escaped  bool
}

func (w *bodyWriter) Write(p []byte) (int, error) {
	if err := w.limits.Step(); err != nil {
		return 0, err
	}
	if len(w.buf)+len(p) > w.limits.MaxValue() {
		return 0, w.limits.Fail(budget.OverLimit("rendered body is larger than the size limit of %d bytes (delivery.max_payload_bytes)", w.limits.MaxValue()))
	}
	for _, c := range p {
		switch {
		case w.escaped:
			w.escaped = false
		case w.inString && c == '\\':
			w.escaped = true
		case c == '"':
			w.inString = !w.inString
		}
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}
