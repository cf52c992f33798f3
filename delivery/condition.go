package delivery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// maxConditionBytes caps a condition's source like a template's.
const maxConditionBytes = MaxTemplateBytes

const (
	// MaxConditionTime bounds one evaluation of a condition; the deadline is
	// checked at every step.
	MaxConditionTime = 500 * time.Millisecond
	// MaxConditionSteps bounds the predicate calls (all, any, filter, map,
	// …, each call of each closure) and additions of one evaluation.
	MaxConditionSteps = 100_000
	// MaxConditionNodes bounds a condition's size after parsing.
	MaxConditionNodes = 2000
	// MaxConditionMemory is expr's memory budget (its ranges and scopes
	// count their items against it).
	MaxConditionMemory = 1_000_000
	// MaxConditionValueBytes caps a string or list a condition builds.
	MaxConditionValueBytes = 1 << 20
	// maxRegexWork bounds a match's subject length times its compiled
	// pattern's size, the cost of Go's linear-time matcher.
	maxRegexWork = 50_000_000
)

// disabledBuiltins are expr's functions that build a value whose size an
// argument chooses (repeat, replace, join), and the clock's, which would
// make a condition's answer depend on when it runs; a condition only needs
// to decide.
var disabledBuiltins = []string{"repeat", "replace", "join", "now", "date", "timezone", "duration"}

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

// CompileConditionIn compiles src in language: LanguageExpr (also "") or
// LanguagePython, Frappe's conditions (pycondition.go).
func CompileConditionIn(language, src string) (*Condition, error) {
	switch language {
	case "", LanguageExpr:
		return CompileCondition(src)
	case LanguagePython:
		if strings.TrimSpace(src) == "" {
			return &Condition{}, nil
		}
		if len(src) > maxConditionBytes {
			return nil, unbuildable("condition: %d bytes is more than the limit of %d", len(src), maxConditionBytes)
		}
		py, err := compilePython(src)
		if err != nil {
			return nil, err
		}
		return &Condition{src: src, py: py}, nil
	}
	return nil, unbuildable("condition language %q is neither %q nor %q", language, LanguageExpr, LanguagePython)
}

// CompileCondition compiles src. An empty source always matches. Fields the
// document lacks read as nil, at any depth (`doc.address.city` is nil when
// there is no address), so `doc.status == "Paid"` is simply false for a
// document without a status; an ordering comparison against nil, such as
// `doc.x > 1`, fails at Match with an error instead.
func CompileCondition(src string) (*Condition, error) {
	if src == "" {
		return &Condition{}, nil
	}
	if len(src) > maxConditionBytes {
		return nil, unbuildable("condition: %d bytes is more than the limit of %d", len(src), maxConditionBytes)
	}
	opts := []expr.Option{
		expr.Env(map[string]any{"doc": map[string]any{}, limitsKey: (*conditionLimits)(nil)}),
		expr.AsBool(),
		expr.MaxNodes(MaxConditionNodes),
		expr.Patch(nilSafeMembers{}),
		expr.Patch(limitPatch{}),
	}
	for _, name := range disabledBuiltins {
		opts = append(opts, expr.DisableBuiltin(name))
	}
	program, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, unbuildable("condition %q: %s", src, withHint(describeExprError(err)))
	}
	return &Condition{src: src, program: program}, nil
}

// Match is MatchAt on the wall clock.
func (c *Condition) Match(doc map[string]any) (bool, error) { return c.MatchAt(doc, time.Time{}) }

// MatchAt evaluates the condition for doc, with now as the time Frappe's
// date helpers read in a Python condition (nowdate(), now(); zero is the
// wall clock). A nil or empty condition matches everything. Errors wrap
// ErrUnbuildable: a condition that cannot be evaluated for this document
// will not become evaluable by retrying.
func (c *Condition) MatchAt(doc map[string]any, now time.Time) (matched bool, err error) {
	if c != nil && c.py != nil {
		defer func() {
			if r := recover(); r != nil {
				matched, err = false, unbuildable("condition %q: evaluation failed: %v", c.src, r)
			}
		}()
		return c.py.match(doc, now)
	}
	if c == nil || c.program == nil {
		return true, nil
	}
	defer func() {
		// expr recovers its own panics; this guards against the ones it
		// might miss, because Match runs inside the delivery worker.
		if r := recover(); r != nil {
			matched, err = false, unbuildable("condition %q: evaluation failed: %v", c.src, r)
		}
	}()
	if doc == nil {
		doc = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), MaxConditionTime)
	defer cancel()
	limits := &conditionLimits{ctx: ctx, steps: MaxConditionSteps}
	machine := vm.VM{MemoryBudget: MaxConditionMemory}
	out, err := machine.Run(c.program, map[string]any{"doc": doc, limitsKey: limits})
	if limits.err != nil {
		return false, &unbuildableError{err: fmt.Errorf("condition %q: %w", c.src, limits.err)}
	}
	if err != nil {
		return false, unbuildable("condition %q: %s", c.src, describeExprError(err))
	}
	b, ok := out.(bool)
	if !ok {
		return false, unbuildable("condition %q: evaluates to %T, not a bool", c.src, out)
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

// limitPatch makes the program report to its conditionLimits: every closure
// body (the predicate of all, any, filter, map, …) and every addition passes
// through Step, and every regular expression match through Matches.
type limitPatch struct{}

func limitsCall(method string, args ...ast.Node) ast.Node {
	return &ast.CallNode{
		Callee:    &ast.MemberNode{Node: &ast.IdentifierNode{Value: limitsKey}, Property: &ast.StringNode{Value: method}, Method: true},
		Arguments: args,
	}
}

func (limitPatch) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.PredicateNode:
		if call, ok := n.Node.(*ast.CallNode); ok && isLimitsCall(call) {
			return
		}
		n.Node = limitsCall("Step", n.Node)
	case *ast.BinaryNode:
		switch n.Operator {
		case "+":
			if t := n.Type(); t != nil && t.Kind() != reflect.Interface && t.Kind() != reflect.String && t.Kind() != reflect.Slice {
				return // numbers cannot grow
			}
			ast.Patch(node, limitsCall("Step", &ast.BinaryNode{Operator: "+", Left: n.Left, Right: n.Right}))
		case "matches":
			ast.Patch(node, limitsCall("Matches", n.Left, n.Right))
		}
	}
}

func isLimitsCall(call *ast.CallNode) bool {
	m, ok := call.Callee.(*ast.MemberNode)
	if !ok {
		return false
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	return ok && id.Value == limitsKey
}

// conditionLimits bounds one evaluation of a condition. expr has a memory
// budget for its ranges but no deadline and no step count, and its string
// concatenation is unbounded; the patched program calls these methods.
type conditionLimits struct {
	ctx   context.Context
	steps int
	err   error
}

func (l *conditionLimits) fail(err error) error {
	if l.err == nil {
		l.err = err
	}
	return l.err
}

// Step spends a step, notices the deadline, and refuses a value larger
// than MaxConditionValueBytes; it returns v unchanged.
func (l *conditionLimits) Step(v any) (any, error) {
	if l.err != nil {
		return nil, l.err
	}
	if l.ctx.Err() != nil {
		return nil, l.fail(overLimit("evaluation took longer than the time limit of %s", MaxConditionTime))
	}
	l.steps--
	if l.steps < 0 {
		return nil, l.fail(overLimit("evaluation needs more than the limit of %d steps; nested predicates over large lists are too big", MaxConditionSteps))
	}
	switch x := v.(type) {
	case string:
		if len(x) > MaxConditionValueBytes {
			return nil, l.fail(overLimit("a string of %d bytes is larger than the size limit of %d bytes", len(x), MaxConditionValueBytes))
		}
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.Len() > MaxConditionValueBytes/8 {
			return nil, l.fail(overLimit("a list of %d items is larger than the size limit of %d items", rv.Len(), MaxConditionValueBytes/8))
		}
	}
	return v, nil
}

// Matches is expr's `matches` operator, refused when Go's linear-time
// matcher would still take too long on this subject and pattern.
func (l *conditionLimits) Matches(subject, pattern string) (bool, error) {
	if _, err := l.Step(nil); err != nil {
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
	if work := mulSize(len(subject)+1, len(prog.Inst)); work > maxRegexWork {
		return false, l.fail(overLimit("matching %d bytes against a pattern of %d instructions exceeds the regular expression limit of %d", len(subject), len(prog.Inst), maxRegexWork))
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return false, fmt.Errorf("invalid regular expression %q: %w", pattern, err)
	}
	return re.MatchString(subject), nil
}
