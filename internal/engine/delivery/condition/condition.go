package condition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

const (
	// MaxTime bounds one evaluation of a condition; the deadline is
	// checked at every step.
	MaxTime = 500 * time.Millisecond
	// MaxSteps bounds the predicate calls (all, any, filter, map,
	// …, each call of each closure) and additions of one evaluation.
	MaxSteps = 100_000
	// MaxNodes bounds a condition's size after parsing.
	MaxNodes = 2000
	// MaxMemory is expr's memory budget (its ranges and scopes
	// count their items against it).
	MaxMemory = 1_000_000
	// MaxValueBytes caps a string or list a condition builds.
	MaxValueBytes = 1 << 20
	// maxRegexWork bounds a match's subject length times its compiled
	// pattern's size, the cost of Go's linear-time matcher.
	maxRegexWork = 50_000_000
)

// builtinCosts is every expr built-in a condition may call, with what a
// call may cost. Every other built-in is disabled at compile, so one that an
// expr upgrade adds cannot be called uncharged until it is given a cost
// here. Left out on purpose: repeat, replace and join, which build a value
// whose size an argument chooses, and now, date, timezone and duration,
// which would make a condition's answer depend on when it runs; a condition
// only needs to decide.
//
// A cost is charged before the call runs: one step for the call (which also
// notices the deadline), plus a step for each KiB read or written and each
// itemsPerStep items visited, and the bytes of the value it may build.
// Predicate built-ins (all, filter, map, …) see only their collection; the
// calls of their closure are charged one step each on their own.
var builtinCosts = map[string]builtinCost{
	// Reading: O(1), or a walk with no value built.
	"len": free, "type": free, "abs": free, "ceil": free, "floor": free, "round": free,
	"first": free, "last": free, "get": free,
	"bitand": free, "bitor": free, "bitxor": free, "bitnand": free, "bitnot": free,
	"bitshl": free, "bitshr": free, "bitushr": free,
	"int": {of: readString}, "float": {of: readString},
	"trim": {of: readString}, "trimPrefix": {of: readString}, "trimSuffix": {of: readString},
	"indexOf": {of: readString}, "lastIndexOf": {of: readString},
	"hasPrefix": {of: readString}, "hasSuffix": {of: readString},
	"max": {of: readItems}, "min": {of: readItems}, "mean": {of: readItems},

	// Building.
	"string": {builds: true, of: func(args []any, room int) (int, int) {
		n := textSize(arg(args, 0), room)
		return kib(n), n
	}},
	"toJSON": {builds: true, of: func(args []any, room int) (int, int) {
		n := textSize(arg(args, 0), room)
		return kib(n), n
	}},
	"fromJSON": {builds: true, of: func(args []any, _ int) (int, int) {
		// Each byte of JSON decodes into at most ~12 bytes of values
		// ("0," is a boxed float64 in an interface).
		n := strLen(args)
		return 4 * kib(n), budget.MulSize(n, 16) + 64
	}},
	"upper": {builds: true, of: caseChange}, "lower": {builds: true, of: caseChange},
	"toBase64":   {builds: true, of: func(args []any, _ int) (int, int) { n := strLen(args); return kib(n), n/3*4 + 8 }},
	"fromBase64": {builds: true, of: func(args []any, _ int) (int, int) { n := strLen(args); return kib(n), n/4*3 + 8 }},
	"split":      {builds: true, of: splitCost}, "splitAfter": {builds: true, of: splitCost},
	"median": {builds: true, of: func(args []any, _ int) (int, int) { n := itemsOf(args); return sortSteps(n), budget.MulSize(n, 16) }},
	"take": {builds: true, of: func(args []any, _ int) (int, int) {
		n := max(lenOf(arg(args, 0)), 0)
		if k, ok := arg(args, 1).(int); ok && k >= 0 {
			n = min(n, k)
		}
		return n / itemsPerStep, budget.MulSize(n, 16)
	}},
	"keys":      {builds: true, of: perItem(16)},
	"values":    {builds: true, of: perItem(16)},
	"toPairs":   {builds: true, of: perItem(72)}, // a [key, value] list each
	"fromPairs": {builds: true, of: perItem(64)},
	"reverse":   {builds: true, of: perItem(16)},
	"uniq":      {builds: true, of: perItem(80)}, // the list and the set of seen items
	"concat":    {builds: true, of: func(args []any, _ int) (int, int) { n := itemsOf(args); return n / itemsPerStep, budget.MulSize(n, 16) }},
	"flatten": {builds: true, of: func(args []any, room int) (int, int) {
		n := leafCount(arg(args, 0), room/16+1)
		return n / itemsPerStep, budget.MulSize(n, 16)
	}},
	"sort": {builds: true, of: func(args []any, _ int) (int, int) {
		n := max(lenOf(arg(args, 0)), 0)
		return sortSteps(n), budget.MulSize(n, 16)
	}},

	// Predicates: the collection's items are visited, and the closure's
	// calls are charged by Step.
	"all": visit, "none": visit, "any": visit, "one": visit,
	"find": visit, "findIndex": visit, "findLast": visit, "findLastIndex": visit,
	"count": visit, "sum": visit, "reduce": visit,
	"filter":  {predicate: true, builds: true, of: perItem(16)},
	"map":     {predicate: true, builds: true, of: perItem(16)},
	"groupBy": {predicate: true, builds: true, of: perItem(80)}, // a map of lists
	"sortBy": {predicate: true, builds: true, of: func(args []any, _ int) (int, int) {
		n := max(lenOf(arg(args, 0)), 0)
		return sortSteps(n), budget.MulSize(n, 32) // the items and their keys
	}},
}

// builtinCost is what a call of one built-in may take.
type builtinCost struct {
	// of is the steps (beyond the call's one) and the bytes of the value
	// a call with args may build. room is the most bytes the budget can
	// still give: a measure may stop past it.
	of func(args []any, room int) (steps, bytes int)
	// builds says the call returns a new value, whose size is checked
	// against what of charged.
	builds bool
	// predicate says the built-in takes a closure after its collection.
	predicate bool
}

const (
	// bytesPerStep and itemsPerStep are the work a built-in may do for
	// one step.
	bytesPerStep = 1 << 10
	itemsPerStep = 16
)

var (
	free  = builtinCost{of: func([]any, int) (int, int) { return 0, 0 }}
	visit = builtinCost{predicate: true, of: perItem(0)}
)

func kib(n int) int { return n / bytesPerStep }

func arg(args []any, i int) any {
	if i < len(args) {
		return args[i]
	}
	return nil
}

func strLen(args []any) int {
	s, _ := arg(args, 0).(string)
	return len(s)
}

func readString(args []any, _ int) (int, int) { return kib(strLen(args)), 0 }

// readItems is the cost of max, min and mean: their arguments' items, one
// level of lists deep.
func readItems(args []any, _ int) (int, int) { return itemsOf(args) / itemsPerStep, 0 }

// caseChange is upper and lower: a rune's case can take up to half as many
// bytes again.
func caseChange(args []any, _ int) (int, int) {
	n := strLen(args)
	return kib(n), n + n/2 + 16
}

// splitCost is split and splitAfter: at most one item per separator (or
// per byte, for ""), each a 16-byte string header; the items share the
// subject's bytes.
func splitCost(args []any, _ int) (int, int) {
	n := strLen(args)
	sep, _ := arg(args, 1).(string)
	items := n/max(len(sep), 1) + 1
	if k, ok := arg(args, 2).(int); ok && k >= 0 {
		items = min(items, k)
	}
	return kib(n) + items/itemsPerStep, budget.MulSize(items, 16) + 24
}

// perItem charges a visit of the first argument's items and size bytes
// for each.
func perItem(size int) func([]any, int) (int, int) {
	return func(args []any, _ int) (int, int) {
		n := max(lenOf(arg(args, 0)), 0)
		return n / itemsPerStep, budget.MulSize(n, size)
	}
}

func sortSteps(n int) int { return n * bits.Len(uint(n)) / itemsPerStep }

// itemsOf is the items of args, counting a list as its items.
func itemsOf(args []any) int {
	n := 0
	for _, a := range args {
		n += max(lenOf(a), 1)
	}
	return n
}

// lenOf is the length of a string, list or map, or -1.
func lenOf(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	case nil:
		return -1
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.String, reflect.Slice, reflect.Array, reflect.Map:
		return rv.Len()
	}
	return -1
}

// shallowSize is the bytes of a value's own storage, not of the values it
// holds (which a charge made when they were built, or the document owns).
func shallowSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		return budget.MulSize(len(x), 16)
	case map[string]any:
		return budget.MulSize(len(x), 64)
	case nil, bool, int, int64, float64:
		return 0
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.String:
		return rv.Len()
	case reflect.Slice:
		return budget.MulSize(rv.Len(), int(rv.Type().Elem().Size()))
	case reflect.Map:
		return budget.MulSize(rv.Len(), 64)
	}
	return 0
}

// textSize bounds the bytes of v written as text by toJSON (indented, with
// every byte of a string possibly escaped as \u00XX) or string (fmt's
// %v), measuring no further than limit.
func textSize(v any, limit int) int {
	s := textSizer{limit: limit}
	s.walk(v, 0)
	return s.n
}

type textSizer struct{ n, limit int }

func (s *textSizer) walk(v any, depth int) {
	if s.n > s.limit {
		return
	}
	indent := 2*depth + 2 // a newline, the indent and a comma
	switch x := v.(type) {
	case string:
		s.n += budget.MulSize(len(x), 6) + 2
	case nil, bool, int, int64, float64:
		s.n += 24 // the longest float64, or "<nil>"
	case []any:
		s.n += 2
		for _, e := range x {
			if s.n += indent; s.n > s.limit {
				return
			}
			s.walk(e, depth+1)
		}
	case map[string]any:
		s.n += 2
		for k, e := range x {
			if s.n += indent + budget.MulSize(len(k), 6) + 4; s.n > s.limit {
				return
			}
			s.walk(e, depth+1)
		}
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			s.n += 2
			for i := range rv.Len() {
				if s.n += indent; s.n > s.limit {
					return
				}
				s.walk(rv.Index(i).Interface(), depth+1)
			}
		case reflect.Map:
			s.n += 2
			for it := rv.MapRange(); it.Next(); {
				if s.n += indent + 4; s.n > s.limit {
					return
				}
				s.walk(it.Key().Interface(), depth+1)
				s.walk(it.Value().Interface(), depth+1)
			}
		case reflect.String:
			s.n += budget.MulSize(rv.Len(), 6) + 2
		default:
			s.n += 256 // a struct or pointer: not in a document
		}
	}
}

// leafCount is the items flatten would return from v, counting no further
// than limit.
func leafCount(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			n++
			return
		}
		for i := range rv.Len() {
			walk(rv.Index(i).Interface())
		}
	}
	walk(v)
	return n
}

// limitsKey is the name under which each evaluation's limits are in the
// environment; the patched program calls its methods.
const limitsKey = "__homing"

// Condition decides whether a document change fires a webhook. It is an
// expr-lang expression over `doc`, such as
// `doc.status == "Paid" && doc.grand_total > 100`, compiled once when the
// webhook is loaded and safe to match from many goroutines.
type Condition struct {
	src     string
	program *vm.Program // nil (and py nil) means always true
	py      *pyCondition
}

// CompileIn compiles src in language: LanguageExpr (also "") or
// LanguagePython, Frappe's conditions (python.go).
func CompileIn(language, src string) (*Condition, error) {
	switch language {
	case "", LanguageExpr:
		return Compile(src)
	case LanguagePython:
		if strings.TrimSpace(src) == "" {
			return &Condition{}, nil
		}
		if len(src) > budget.MaxSourceBytes {
			return nil, send.Unbuildable("condition: %d bytes is more than the limit of %d", len(src), budget.MaxSourceBytes)
		}
		py, err := compilePython(src)
		if err != nil {
			return nil, err
		}
		return &Condition{src: src, py: py}, nil
	}
	return nil, send.Unbuildable("condition language %q is neither %q nor %q", language, LanguageExpr, LanguagePython)
}

// Compile compiles src. An empty source always matches. Fields the
// document lacks read as nil, at any depth (`doc.address.city` is nil when
// there is no address), so `doc.status == "Paid"` is simply false for a
// document without a status; an ordering comparison against nil, such as
// `doc.x > 1`, fails at Match with an error instead.
func Compile(src string) (*Condition, error) {
	if src == "" {
		return &Condition{}, nil
	}
	if len(src) > budget.MaxSourceBytes {
		return nil, send.Unbuildable("condition: %d bytes is more than the limit of %d", len(src), budget.MaxSourceBytes)
	}
	if strings.Contains(src, limitsKey) {
		// The charges the patched program makes are not the condition's
		// to call: a negative one would mint budget.
		return nil, send.Unbuildable("condition %q: names starting with %s are Homing's own", src, limitsKey)
	}
	opts := []expr.Option{
		expr.Env(map[string]any{"doc": map[string]any{}, limitsKey: (*conditionLimits)(nil)}),
		expr.AsBool(),
		expr.MaxNodes(MaxNodes),
		expr.Patch(nilSafeMembers{}),
		expr.Patch(newLimitPatch()),
	}
	opts = append(opts, limitsOptions()...)
	for _, name := range builtin.Names {
		if _, ok := builtinCosts[name]; !ok {
			opts = append(opts, expr.DisableBuiltin(name))
		}
	}
	program, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, send.Unbuildable("condition %q: %s", src, withComparisonHint(describeExprError(err)))
	}
	return &Condition{src: src, program: program}, nil
}

// Match is MatchAt on the wall clock.
func (c *Condition) Match(doc map[string]any) (bool, error) { return c.MatchAt(doc, time.Time{}) }

// MatchAt evaluates the condition for doc, with now as the time Frappe's
// date helpers read in a Python condition (nowdate(), now(); zero is the
// wall clock). A nil or empty condition matches everything. Errors wrap
// send.ErrUnbuildable: a condition that cannot be evaluated for this
// document will not become evaluable by retrying; except a stop that is no
// verdict on the condition (budget.NoVerdict: the process's heap ceiling,
// the time limit).
func (c *Condition) MatchAt(doc map[string]any, now time.Time) (matched bool, err error) {
	return c.MatchWithin(doc, now, 0)
}

// MatchWithin is MatchAt with a time limit of its own
// (delivery.condition_time_limit); zero is MaxTime. Tests give it
// one they reach without a slow condition, or one out of reach so that a
// loaded machine cannot stop an evaluation before its steps or bytes do.
func (c *Condition) MatchWithin(doc map[string]any, now time.Time, limit time.Duration) (matched bool, err error) {
	limit = cmp.Or(limit, MaxTime)
	if c != nil && c.py != nil {
		defer func() {
			if r := recover(); r != nil {
				matched, err = false, send.Unbuildable("condition %q: evaluation failed: %v", c.src, r)
			}
		}()
		return c.py.match(doc, now, limit)
	}
	if c == nil || c.program == nil {
		return true, nil
	}
	defer func() {
		// expr recovers its own panics; this guards against the ones it
		// might miss, because Match runs inside the delivery worker.
		if r := recover(); r != nil {
			matched, err = false, send.Unbuildable("condition %q: evaluation failed: %v", c.src, r)
		}
	}()
	if doc == nil {
		doc = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	limits := &conditionLimits{Budget: conditionBudget(ctx, limit)}
	machine := vm.VM{MemoryBudget: MaxMemory}
	out, err := machine.Run(c.program, map[string]any{"doc": doc, limitsKey: limits})
	if err := limits.Err(); err != nil {
		return false, stoppedBy(fmt.Sprintf("condition %q", c.src), err)
	}
	if err != nil {
		if strings.Contains(err.Error(), "memory budget exceeded") {
			// expr's own count of the items its ranges and scopes hold.
			return false, stoppedBy(fmt.Sprintf("condition %q", c.src), budget.OverLimit("%s (a limit of %d items)", describeExprError(err), MaxMemory))
		}
		return false, send.Unbuildable("condition %q: %s", c.src, describeExprError(err))
	}
	b, ok := out.(bool)
	if !ok {
		return false, send.Unbuildable("condition %q: evaluates to %T, not a bool", c.src, out)
	}
	return b, nil
}

// String returns the condition's source.
func (c *Condition) String() string {
	if c == nil {
		return ""
	}
	return c.src
}

// describeExprError drops the multi-line source snippet expr appends and
// keeps the message with its position.
func describeExprError(err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Line > 0 {
			return oneLine(fmt.Sprintf("line %d col %d: %s", fe.Line, fe.Column+1, fe.Message))
		}
		return oneLine(fe.Message)
	}
	return oneLine(err.Error())
}

// oneLine joins a message's lines and runs of spaces into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// assignInCondition is how expr refuses `doc.status = "Paid"`.
const assignInCondition = `unexpected token Operator("=")`

// withComparisonHint adds to a parse error's description the fix it most
// likely needs: `==` for a condition's `=`.
func withComparisonHint(msg string) string {
	if strings.Contains(msg, assignInCondition) {
		return msg + "; did you mean `==`? (`=` is not a comparison)"
	}
	return msg
}

// nilSafeMembers makes every field access behave like expr's `?.`, so that
// a missing field reads as nil at any depth instead of failing on the next
// access.
type nilSafeMembers struct{}

func (nilSafeMembers) Visit(node *ast.Node) {
	member, ok := (*node).(*ast.MemberNode)
	if !ok || member.Method {
		return
	}
	member.Optional = true
	ast.Patch(node, &ast.ChainNode{Node: member})
}

// limitPatch makes the program report to its conditionLimits before it
// does any work whose size the data chooses: every closure body (the
// predicate of all, any, filter, map, …) passes through Step; every call of
// a built-in through Before (and After when it builds a value), charged
// from its arguments by builtinCosts; every `+` on strings or lists through
// Grow, every range through Range, every `in` over a list through In, every
// large list or map literal through Pay; and every regular expression match
// through Matches. Operands are bound with `let` so that each is evaluated
// once and the operation itself keeps expr's types, so a mistyped call is
// still refused at compile.
type limitPatch struct {
	vars     int                   // names given to bound operands
	original map[ast.Node]ast.Node // patched literal → itself, for `in`
}

func newLimitPatch() *limitPatch { return &limitPatch{original: map[ast.Node]ast.Node{}} }

// limitsCall is a call of one of limitsFuncs.
func limitsCall(name string, args ...ast.Node) ast.Node {
	return &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: limitsKey + "_" + name},
		Arguments: append([]ast.Node{&ast.IdentifierNode{Value: limitsKey}}, args...),
	}
}

// limitsMethod is a call of a method of conditionLimits.
func limitsMethod(method string, args ...ast.Node) ast.Node {
	return &ast.CallNode{
		Callee:    &ast.MemberNode{Node: &ast.IdentifierNode{Value: limitsKey}, Property: &ast.StringNode{Value: method}, Method: true},
		Arguments: args,
	}
}

// smallLiteral is the size of a list or map literal charged as free: its
// items are bounded by the condition's nodes, and only its repetition in a
// predicate could make it matter.
const smallLiteral = 4

func (p *limitPatch) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.PredicateNode:
		if call, ok := n.Node.(*ast.CallNode); ok && isLimitsCall(call) {
			return
		}
		n.Node = limitsCall("Step", n.Node)
	case *ast.BuiltinNode:
		if _, ok := builtinCosts[n.Name]; !ok || p.bound(n.Arguments) {
			return
		}
		p.patchBuiltin(node, n)
	case *ast.BinaryNode:
		switch n.Operator {
		case "+":
			if t := n.Type(); t != nil && t.Kind() != reflect.Interface && t.Kind() != reflect.String && t.Kind() != reflect.Slice {
				return // numbers cannot grow
			}
			p.patchOperator(node, n, "Grow")
		case "..":
			p.patchOperator(node, n, "Range")
			p.original[*node] = n
		case "in":
			if orig, ok := p.original[n.Right]; ok {
				// A literal list or constant range: expr's optimizer
				// turns it into a set or two comparisons at compile.
				if _, isRange := orig.(*ast.BinaryNode); !isRange || isConstant(orig) {
					n.Right = orig
					return
				}
			}
			p.patchOperator(node, n, "In")
		case "matches":
			ast.Patch(node, limitsMethod("Matches", n.Left, n.Right))
		}
	case *ast.ArrayNode:
		if len(n.Nodes) > smallLiteral {
			ast.Patch(node, &ast.SequenceNode{Nodes: []ast.Node{limitsCall("Pay", &ast.IntegerNode{Value: 0}, &ast.IntegerNode{Value: 16 * len(n.Nodes)}), n}})
			p.original[*node] = n
		}
	case *ast.MapNode:
		if len(n.Pairs) > smallLiteral {
			ast.Patch(node, &ast.SequenceNode{Nodes: []ast.Node{limitsCall("Pay", &ast.IntegerNode{Value: 0}, &ast.IntegerNode{Value: 64 * len(n.Pairs)}), n}})
		}
	}
}

func isConstant(n ast.Node) bool {
	b := n.(*ast.BinaryNode)
	_, l := b.Left.(*ast.IntegerNode)
	_, r := b.Right.(*ast.IntegerNode)
	return l && r
}

// bind names value and returns the `let` that binds it around body (set
// later) and an identifier that reads it.
func (p *limitPatch) bind(value ast.Node) (*ast.VariableDeclaratorNode, *ast.IdentifierNode) {
	p.vars++
	name := fmt.Sprintf("__homing_%d", p.vars)
	id := &ast.IdentifierNode{Value: name}
	id.SetLocation(value.Location()) // a type error names the operand
	return &ast.VariableDeclaratorNode{Name: name, Value: value}, id
}

// bound reports whether a built-in's arguments are already the names
// patchBuiltin gave them.
func (p *limitPatch) bound(args []ast.Node) bool {
	if len(args) == 0 {
		return false
	}
	id, ok := args[0].(*ast.IdentifierNode)
	return ok && strings.HasPrefix(id.Value, "__homing_")
}

// patchBuiltin rewrites name(a, b) into
//
//	let x = a; let y = b; let c = __homing.Before("name", x, y); let r = name(x, y); __homing.After(r, c); r
//
// (without c, r and After when the built-in builds nothing). A predicate
// built-in has only its collection bound and charged: its closure cannot
// be passed as a value, and its body is charged by Step on each call.
func (p *limitPatch) patchBuiltin(node *ast.Node, n *ast.BuiltinNode) {
	cost := builtinCosts[n.Name]
	bindN := len(n.Arguments)
	if cost.predicate {
		bindN = min(bindN, 1)
	}
	var lets []*ast.VariableDeclaratorNode
	args := append([]ast.Node(nil), n.Arguments...)
	before := []ast.Node{&ast.StringNode{Value: n.Name}}
	for i := range bindN {
		let, id := p.bind(args[i])
		lets = append(lets, let)
		args[i] = id
		before = append(before, &ast.IdentifierNode{Value: id.Value})
	}
	call := &ast.BuiltinNode{Name: n.Name, Arguments: args, Throws: n.Throws, Map: n.Map, Threshold: n.Threshold}
	var body ast.Node
	if cost.builds {
		charged, c := p.bind(limitsCall("Before", before...))
		result, r := p.bind(call)
		result.Expr = &ast.SequenceNode{Nodes: []ast.Node{limitsCall("After", r, c), &ast.IdentifierNode{Value: r.Value}}}
		charged.Expr = result
		body = charged
	} else {
		body = &ast.SequenceNode{Nodes: []ast.Node{limitsCall("Before", before...), call}}
	}
	for i := len(lets) - 1; i >= 0; i-- {
		lets[i].Expr = body
		body = lets[i]
	}
	setLocation(body, n.Location())
	ast.Patch(node, body)
}

// patchOperator rewrites `a op b` into
// `let x = a; let y = b; __homing.method(x, y); x op y`.
func (p *limitPatch) patchOperator(node *ast.Node, n *ast.BinaryNode, method string) {
	left, l := p.bind(n.Left)
	right, r := p.bind(n.Right)
	op := &ast.BinaryNode{Operator: n.Operator, Left: l, Right: r}
	right.Expr = &ast.SequenceNode{Nodes: []ast.Node{limitsCall(method, &ast.IdentifierNode{Value: l.Value}, &ast.IdentifierNode{Value: r.Value}), op}}
	left.Expr = right
	setLocation(left, n.Location())
	ast.Patch(node, left)
}

// setLocation gives the nodes a patch made the location of the node they
// replace, so that an error names the place in the condition's source. It
// stops at a node that has one: the condition's own, already patched.
func setLocation(n ast.Node, loc file.Location) {
	if n == nil || n.Location() != (file.Location{}) {
		return
	}
	n.SetLocation(loc)
	switch x := n.(type) {
	case *ast.VariableDeclaratorNode:
		setLocation(x.Value, loc)
		setLocation(x.Expr, loc)
	case *ast.SequenceNode:
		for _, c := range x.Nodes {
			setLocation(c, loc)
		}
	case *ast.CallNode:
		setLocation(x.Callee, loc)
		for _, c := range x.Arguments {
			setLocation(c, loc)
		}
	case *ast.BuiltinNode:
		for _, c := range x.Arguments {
			setLocation(c, loc)
		}
	case *ast.BinaryNode:
		setLocation(x.Left, loc)
		setLocation(x.Right, loc)
	case *ast.MemberNode:
		setLocation(x.Node, loc)
		setLocation(x.Property, loc)
	}
}

func isLimitsCall(call *ast.CallNode) bool {
	if id, ok := call.Callee.(*ast.IdentifierNode); ok {
		return strings.HasPrefix(id.Value, limitsKey+"_")
	}
	m, ok := call.Callee.(*ast.MemberNode)
	if !ok {
		return false
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	return ok && id.Value == limitsKey
}

// stoppedBy is the error of an evaluation its budget stopped: prefix names
// the definition (`condition "x"`). A limit of the definition's own
// (steps, bytes) wraps send.ErrUnbuildable, since every retry would meet it
// again; the process's ceiling and the wall-clock time limit do not
// (budget.NoVerdict), since a later attempt may find room or an idle CPU.
func stoppedBy(prefix string, err error) error {
	if budget.NoVerdict(err) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return send.Unbuildable("%s: %w", prefix, err)
}

// conditionLimits bounds one evaluation of a condition. expr has a memory
// budget for its ranges but no deadline and no step count, and its string
// concatenation is unbounded; the patched program calls these methods,
// which charge the evaluation's budget.
type conditionLimits struct {
	*budget.Budget
}

// conditionBudget is the budget of one evaluation of a condition, in
// either language.
func conditionBudget(ctx context.Context, limit time.Duration) *budget.Budget {
	return budget.New(ctx, budget.Limits{
		What:     "evaluation",
		Hint:     "; nested predicates over large lists are too big",
		Limit:    limit,
		Steps:    MaxSteps,
		Bytes:    MaxPythonBytes,
		MaxValue: MaxValueBytes,
	})
}

// limitsFuncs are the functions the patched program calls (named
// __homing_Step, __homing_Before, …), each with the evaluation's
// conditionLimits as its first argument: expr calls a function it was
// given without reflection, where a method of the environment would be
// looked up, and a method value made, at every call.
var limitsFuncs = map[string]func(l *conditionLimits, args []any) (any, error){
	"Step": func(l *conditionLimits, args []any) (any, error) { return l.step(arg(args, 0)) },
	"Pay":  func(l *conditionLimits, args []any) (any, error) { return l.pay(intAt(args, 0), intAt(args, 1)) },
	"Before": func(l *conditionLimits, args []any) (any, error) {
		name, _ := arg(args, 0).(string)
		return l.before(name, args[min(1, len(args)):])
	},
	"After": func(l *conditionLimits, args []any) (any, error) { return l.after(arg(args, 0), intAt(args, 1)) },
	"Grow":  func(l *conditionLimits, args []any) (any, error) { return l.grow(arg(args, 0), arg(args, 1)) },
	"Range": func(l *conditionLimits, args []any) (any, error) { return l.rangeOf(arg(args, 0), arg(args, 1)) },
	"In":    func(l *conditionLimits, args []any) (any, error) { return l.in(arg(args, 1)) },
}

// limitsOptions declares limitsFuncs to expr.
func limitsOptions() []expr.Option {
	opts := make([]expr.Option, 0, len(limitsFuncs))
	for name, f := range limitsFuncs {
		opts = append(opts, expr.Function(limitsKey+"_"+name, func(params ...any) (any, error) {
			l, ok := arg(params, 0).(*conditionLimits)
			if !ok || l == nil {
				return nil, fmt.Errorf("%s_%s is Homing's own", limitsKey, name)
			}
			return f(l, params[1:])
		}))
	}
	return opts
}

func intAt(args []any, i int) int {
	n, _ := arg(args, i).(int)
	return n
}

// pay charges steps and bytes the patched program knows at compile (a
// list or map literal).
func (l *conditionLimits) pay(steps, bytes int) (bool, error) {
	if err := l.Charge(1 + max(steps, 0)); err != nil {
		return false, err
	}
	return true, l.Alloc(max(bytes, 0))
}

// before charges a call of the built-in name from its arguments, before it
// runs (refusing before it allocates), and returns the bytes it charged.
func (l *conditionLimits) before(name string, args []any) (int, error) {
	cost, ok := builtinCosts[name]
	if !ok {
		return 0, l.Fail(fmt.Errorf("built-in %s has no cost and cannot be called", name))
	}
	steps, bytes := cost.of(args, l.room())
	if err := l.Charge(1 + steps); err != nil {
		return 0, err
	}
	if bytes > 0 {
		if err := l.Alloc(bytes); err != nil {
			return 0, err
		}
	}
	return bytes, nil
}

// after charges what a built-in's result holds beyond the charged bytes
// Before estimated, so a cost function that underestimates still cannot
// let a value grow unbounded.
func (l *conditionLimits) after(result any, charged int) (bool, error) {
	if extra := shallowSize(result) - max(charged, 0); extra > 0 {
		return false, l.Alloc(extra)
	}
	return true, nil
}

// grow charges `a + b` before it builds a string or list.
func (l *conditionLimits) grow(a, b any) (bool, error) {
	if err := l.Budget.Step(); err != nil {
		return false, err
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return true, l.Alloc(len(x) + len(y))
		}
	case float64, int, int64, nil:
		return true, nil
	}
	if la, lb := lenOf(a), lenOf(b); la >= 0 && lb >= 0 {
		return true, l.Alloc(budget.MulSize(la+lb, 16))
	}
	return true, nil
}

// rangeOf charges `from..to` before it builds the list of its integers.
func (l *conditionLimits) rangeOf(from, to any) (bool, error) {
	a, okA := toInt(from)
	b, okB := toInt(to)
	if !okA || !okB || b < a {
		return true, l.Budget.Step() // expr refuses what is not a range
	}
	n := b - a + 1
	if n <= 0 { // past the largest int
		n = math.MaxInt
	}
	if err := l.Alloc(budget.MulSize(n, 8)); err != nil {
		return false, err
	}
	return true, l.Charge(1 + n/itemsPerStep)
}

// toInt is the integers expr's `..` takes.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	}
	return 0, false
}

// in charges `x in list` for the items it compares.
func (l *conditionLimits) in(list any) (bool, error) {
	n := 0
	if _, isMap := list.(map[string]any); !isMap {
		n = max(lenOf(list), 0)
	}
	return true, l.Charge(1 + n/itemsPerStep)
}

// room is the most bytes one charge can still get: past it, a cost
// function may stop measuring, since the charge is refused anyway.
func (l *conditionLimits) room() int { return min(l.BytesLeft(), l.MaxValue()) + 1 }

// step spends a step, notices the deadline, and refuses a value larger
// than MaxValueBytes; it returns v unchanged.
func (l *conditionLimits) step(v any) (any, error) {
	if err := l.Budget.Step(); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string:
		if len(x) > MaxValueBytes {
			return nil, l.Fail(budget.OverLimit("a string of %d bytes is larger than the size limit of %d bytes", len(x), MaxValueBytes))
		}
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.Len() > MaxValueBytes/8 {
			return nil, l.Fail(budget.OverLimit("a list of %d items is larger than the size limit of %d items", rv.Len(), MaxValueBytes/8))
		}
	}
	return v, nil
}

// Matches is expr's `matches` operator, refused when Go's linear-time
// matcher would still take too long on this subject and pattern.
func (l *conditionLimits) Matches(subject, pattern string) (bool, error) {
	if _, err := l.step(nil); err != nil {
		return false, err
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return false, fmt.Errorf("invalid regular expression %q: %w", pattern, err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return false, fmt.Errorf("invalid regular expression %q: %w", pattern, err)
	}
	if work := budget.MulSize(len(subject)+1, len(prog.Inst)); work > maxRegexWork {
		return false, l.Fail(budget.OverLimit("matching %d bytes against a pattern of %d instructions exceeds the regular expression limit of %d", len(subject), len(prog.Inst), maxRegexWork))
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return false, fmt.Errorf("invalid regular expression %q: %w", pattern, err)
	}
	return re.MatchString(subject), nil
}
