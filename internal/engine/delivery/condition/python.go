package condition

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/gonja/exec"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// Condition languages (models.Webhook.ConditionLanguage).
const (
	LanguageExpr   = "expr"
	LanguagePython = "python"
)

// MaxPythonBytes is how many bytes of strings and lists the
// operators of one Python condition may build in all (each value at most
// MaxValueBytes). A condition has no loops, so its steps are
// bounded by its size; this bounds what `+` and `*` make of big fields.
const MaxPythonBytes = 8 * MaxValueBytes

// Frappe conditions are Python evaluated by frappe.safe_eval
// (frappe/utils/safe_exec.py, safe_eval) with eval_locals = {doc, utils}
// (frappe/integrations/doctype/webhook/webhook.py, get_context) and the
// frappe.utils data helpers also at top level (safe_exec.py, add_data_utils).
// Homing parses them with go.starlark.net (Starlark's expressions are
// Python's syntax), refuses at compile time everything outside the subset
// Frappe conditions use, and rewrites every comparison and arithmetic
// operator into a call of pyOp, which has Python's semantics where
// Starlark's differ (False == 0, True + 1).

// pyFunctions are the names a Python condition may call or read.
var pyFunctions = []string{"len", "int", "float", "str", "nowdate", "now", "getdate", "add_days", "date_diff", "flt", "cint", "cstr"}

// pyMethods are the methods a Python condition may call: those with a
// cost (pyMethodCosts).
func pyMethods() []string { return slices.Sorted(maps.Keys(pyMethodCosts)) }

var pyNames = append([]string{"doc", "True", "False", "None", "frappe", "utils"}, pyFunctions...)

const pyOpName = "__homing_op"

var pyFileOptions = &syntax.FileOptions{}

// pyCondition is a compiled Python condition: the checked and rewritten
// expression, compiled once into `lambda doc: <expression>`. The compiled
// function is frozen and each evaluation calls it on a thread of its own,
// so evaluations share it safely (the syntax tree, which Starlark's
// resolver mutates, is resolved once, here). BenchmarkConditionMatch
// measures what that saves over parsing for every evaluation.
type pyCondition struct {
	src string
	fn  *starlark.Function
}

// compilePython checks src against the subset and reports the first
// construct outside it by name.
func compilePython(src string) (*pyCondition, error) {
	text := pyIsToEquals(src)
	e, err := parsePython(text)
	if err != nil {
		return nil, err
	}
	lambda := &syntax.LambdaExpr{Params: []syntax.Expr{&syntax.Ident{Name: "doc"}}, Body: e}
	v, err := starlark.EvalExprOptions(pyFileOptions, &starlark.Thread{Name: "compile condition"}, lambda, pyEnv())
	if err != nil {
		return nil, send.Unbuildable("condition: %v", err)
	}
	fn, ok := v.(*starlark.Function)
	if !ok {
		return nil, send.Unbuildable("condition: compiled to %s, not a function", v.Type())
	}
	fn.Freeze()
	return &pyCondition{src: text, fn: fn}, nil
}

// parsePython parses and rewrites text, or says what it cannot take.
func parsePython(text string) (syntax.Expr, error) {
	text = strings.TrimSpace(text)
	masked, ops := maskComparisons(text)
	e, err := pyFileOptions.ParseExpr("condition", masked, 0)
	if err != nil {
		// Say what is wrong in the words of the source as written.
		original, err2 := pyFileOptions.ParseExpr("condition", text, 0)
		if err2 != nil {
			return nil, describePythonSyntax(text, err2)
		}
		if _, err3 := rewritePython(original, pyOps{}); err3 != nil {
			return nil, err3 // a construct outside the subset, named
		}
		return nil, describePythonSyntax(text, err)
	}
	return rewritePython(e, ops)
}

// pyOps are the comparison operators maskComparisons replaced, by their
// position in the source.
type pyOps map[[2]int32]syntax.Token

// maskComparisons replaces every comparison operator outside strings by
// "|" padded to the same width (Starlark's comparisons do not chain, its |
// does, one precedence level up, and no Frappe condition uses it), and
// records which operator stood where, so that rewriteComparison gives
// a < b < c Python's meaning: a < b and b < c.
func maskComparisons(src string) (string, pyOps) {
	ops := pyOps{}
	var b strings.Builder
	runes := []rune(src)
	var quote rune
	line, col := int32(1), int32(1)
	word := func(i int, w string) bool {
		if i+len(w) > len(runes) || string(runes[i:i+len(w)]) != w {
			return false
		}
		before := i == 0 || !isWordRune(runes[i-1])
		after := i+len(w) == len(runes) || !isWordRune(runes[i+len(w)])
		return before && after
	}
	emit := func(n int, tok syntax.Token) {
		if tok != 0 {
			ops[[2]int32{line, col}] = tok
			b.WriteString("|" + strings.Repeat(" ", n-1))
		}
	}
	for i := 0; i < len(runes); {
		r := runes[i]
		n, tok := 1, syntax.Token(0)
		switch {
		case quote != 0:
			if r == '\\' && i+1 < len(runes) {
				n = 2
			} else if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '|':
			ops[[2]int32{line, col}] = syntax.ILLEGAL // the user's own |, refused
		case i+1 < len(runes) && (string(runes[i:i+2]) == "<<" || string(runes[i:i+2]) == ">>"):
			n = 2
		case i+1 < len(runes) && runes[i+1] == '=' && strings.ContainsRune("=!<>", r):
			n, tok = 2, map[rune]syntax.Token{'=': syntax.EQL, '!': syntax.NEQ, '<': syntax.LE, '>': syntax.GE}[r]
		case r == '<':
			tok = syntax.LT
		case r == '>':
			tok = syntax.GT
		case word(i, "not"):
			j := i + 3
			for j < len(runes) && (runes[j] == ' ' || runes[j] == '\t') {
				j++
			}
			if word(j, "in") {
				n, tok = j+2-i, syntax.NOT_IN
			} else {
				n = 3
			}
		case word(i, "in"):
			n, tok = 2, syntax.IN
		}
		if tok != 0 {
			emit(n, tok)
		} else {
			b.WriteString(string(runes[i : i+n]))
		}
		for _, c := range runes[i : i+n] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		i += n
	}
	return b.String(), ops
}

func isWordRune(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// rewriteComparison turns a masked comparison, or a chain of them, into
// calls of pyOp joined by and: a < b < c is (a < b) and (b < c), as in
// Python (b is evaluated twice, which a condition cannot tell).
func rewriteComparison(x *syntax.BinaryExpr, ops pyOps) (syntax.Expr, error) {
	var operands []syntax.Expr
	var toks []syntax.Token
	var e syntax.Expr = x
	for {
		b, ok := e.(*syntax.BinaryExpr)
		if !ok || b.Op != syntax.PIPE {
			operands = append(operands, e)
			break
		}
		tok := ops[[2]int32{b.OpPos.Line, b.OpPos.Col}]
		if tok == 0 || tok == syntax.ILLEGAL {
			return nil, send.Unbuildable("condition: the operator | is not allowed")
		}
		operands = append(operands, b.Y)
		toks = append(toks, tok)
		e = b.X
	}
	slices.Reverse(operands)
	slices.Reverse(toks)
	for i, o := range operands {
		r, err := rewritePython(o, ops)
		if err != nil {
			return nil, err
		}
		operands[i] = r
	}
	var out syntax.Expr
	for i, tok := range toks {
		call := pyOpCall(tok, operands[i], operands[i+1])
		if out == nil {
			out = call
		} else {
			out = &syntax.BinaryExpr{Op: syntax.AND, X: out, Y: call}
		}
	}
	return out, nil
}

// describePythonSyntax names the statement or construct a parse error
// comes from: conditions are one expression.
func describePythonSyntax(text string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "does not associate with") {
		return send.Unbuildable("condition: chained comparisons (a < b < c) are not supported: write a < b and b < c")
	}
	if f, ferr := pyFileOptions.Parse("condition", text, 0); ferr == nil && len(f.Stmts) > 0 {
		switch f.Stmts[0].(type) {
		case *syntax.AssignStmt:
			return send.Unbuildable("condition: an assignment is not a condition; write one expression")
		case *syntax.DefStmt:
			return send.Unbuildable("condition: def is not allowed; write one expression")
		case *syntax.ForStmt, *syntax.WhileStmt:
			return send.Unbuildable("condition: loops are not allowed; write one expression")
		case *syntax.IfStmt:
			return send.Unbuildable("condition: an if statement is not allowed; use x if c else y")
		case *syntax.LoadStmt:
			return send.Unbuildable("condition: load is not allowed")
		}
	}
	if strings.Contains(text, "import ") {
		return send.Unbuildable("condition: import is not allowed")
	}
	return send.Unbuildable("condition: not Python the subset understands: %s", msg)
}

// rewritePython checks e against the subset and returns it rewritten for
// Python's semantics and the budget: every operator Python and Starlark
// disagree on becomes a call of pyOp, every method call one of pyMethod and
// every slice one of pySliced, which charge what they build first. Each kind
// of expression has its step below; the first construct outside the subset
// is refused, named.
func rewritePython(e syntax.Expr, ops pyOps) (syntax.Expr, error) {
	switch x := e.(type) {
	case *syntax.Ident:
		return checked(x, checkName(x))
	case *syntax.Literal:
		return checked(x, checkLiteral(x))
	case *syntax.ParenExpr:
		return checked(x, rewriteAll(ops, &x.X))
	case *syntax.UnaryExpr:
		return rewriteUnary(x, ops)
	case *syntax.BinaryExpr:
		if x.Op == syntax.PIPE {
			return rewriteComparison(x, ops)
		}
		return rewriteBinary(x, ops)
	case *syntax.CondExpr:
		return checked(x, rewriteAll(ops, &x.Cond, &x.True, &x.False))
	case *syntax.DotExpr:
		return rewriteDot(x, ops)
	case *syntax.CallExpr:
		return rewriteCall(x, ops)
	case *syntax.IndexExpr:
		return checked(x, rewriteAll(ops, &x.X, &x.Y))
	case *syntax.SliceExpr:
		return rewriteSlice(x, ops)
	case *syntax.TupleExpr:
		return checked(x, rewriteList(x.List, ops))
	case *syntax.ListExpr:
		return checked(x, rewriteList(x.List, ops))
	}
	return nil, refuseConstruct(e)
}

// checked is e, or nothing when err says why e is refused.
func checked(e syntax.Expr, err error) (syntax.Expr, error) {
	if err != nil {
		return nil, err
	}
	return e, nil
}

// rewriteAll rewrites each expression in place, in order, stopping at the
// first refusal.
func rewriteAll(ops pyOps, es ...*syntax.Expr) error {
	for _, p := range es {
		r, err := rewritePython(*p, ops)
		if err != nil {
			return err
		}
		*p = r
	}
	return nil
}

// rewriteList rewrites the items of a tuple or list in place.
func rewriteList(items []syntax.Expr, ops pyOps) error {
	for i := range items {
		if err := rewriteAll(ops, &items[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkName refuses a name a condition can neither read nor call.
func checkName(x *syntax.Ident) error {
	if !slices.Contains(pyNames, x.Name) {
		return send.Unbuildable("condition: unknown name %q (a condition reads doc, True, False, None and calls %s)", x.Name, strings.Join(pyFunctions, ", "))
	}
	return nil
}

// checkLiteral refuses bytes literals; numbers and strings are Python's.
func checkLiteral(x *syntax.Literal) error {
	if x.Token == syntax.BYTES {
		return send.Unbuildable("condition: bytes literals are not allowed")
	}
	return nil
}

// rewriteUnary keeps not, - and + and refuses the rest (~).
func rewriteUnary(x *syntax.UnaryExpr, ops pyOps) (syntax.Expr, error) {
	if x.Op != syntax.NOT && x.Op != syntax.MINUS && x.Op != syntax.PLUS {
		return nil, send.Unbuildable("condition: the operator %s is not allowed", x.Op)
	}
	return checked(x, rewriteAll(ops, &x.X))
}

// rewriteBinary keeps and and or, turns a comparison or arithmetic operator
// into a call of pyOp, and refuses the rest (bitwise operators, **). The
// comparisons maskComparisons hid behind | are rewriteComparison's.
func rewriteBinary(x *syntax.BinaryExpr, ops pyOps) (syntax.Expr, error) {
	left, err := rewritePython(x.X, ops)
	if err != nil {
		return nil, err
	}
	right, err := rewritePython(x.Y, ops)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case syntax.AND, syntax.OR:
		x.X, x.Y = left, right
		return x, nil
	case syntax.EQL, syntax.NEQ, syntax.LT, syntax.GT, syntax.LE, syntax.GE, syntax.IN, syntax.NOT_IN,
		syntax.PLUS, syntax.MINUS, syntax.STAR, syntax.SLASH, syntax.SLASHSLASH, syntax.PERCENT:
		return pyOpCall(x.Op, left, right), nil
	}
	return nil, send.Unbuildable("condition: the operator %s is not allowed", x.Op)
}

// pyOpCall is the call of pyOp that applies op to x and y.
func pyOpCall(op syntax.Token, x, y syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: &syntax.Ident{Name: pyOpName}, Args: []syntax.Expr{stringLiteral(op.String()), x, y}}
}

// stringLiteral is s as a string literal of the syntax tree.
func stringLiteral(s string) *syntax.Literal {
	return &syntax.Literal{Token: syntax.STRING, Value: s, Raw: fmt.Sprintf("%q", s)}
}

// rewriteDot checks an attribute read: under utils and frappe.utils only
// the helpers Homing has, and under frappe nothing but utils (the rest of
// frappe reads Frappe's database, which a condition cannot reach).
func rewriteDot(x *syntax.DotExpr, ops pyOps) (syntax.Expr, error) {
	if err := rewriteAll(ops, &x.X); err != nil {
		return nil, err
	}
	name := x.Name.Name
	if id, ok := x.X.(*syntax.Ident); ok && (id.Name == "utils") && !slices.Contains(pyFunctions, name) {
		return nil, send.Unbuildable("condition: utils.%s is not one of the helpers Homing has (%s)", name, strings.Join(pyFunctions[4:], ", "))
	}
	if id, ok := x.X.(*syntax.Ident); ok && id.Name == "frappe" && name != "utils" {
		return nil, send.Unbuildable("condition: frappe.%s is not available: Homing has only the event's document and the frappe.utils helpers; Frappe's database cannot be read", name)
	}
	if d, ok := x.X.(*syntax.DotExpr); ok && d.Name.Name == "utils" && !slices.Contains(pyFunctions, name) {
		return nil, send.Unbuildable("condition: frappe.utils.%s is not one of the helpers Homing has (%s)", name, strings.Join(pyFunctions[4:], ", "))
	}
	return x, nil
}

// rewriteCall checks a call, its callee first, then its arguments, and
// turns a method call into a call of pyMethod, which charges the method's
// cost first; a call of a helper (utils.X, frappe.utils.X) stays one.
func rewriteCall(x *syntax.CallExpr, ops pyOps) (syntax.Expr, error) {
	if err := checkCallee(x.Fn); err != nil {
		return nil, err
	}
	// frappe.db.X and friends are named before the method is.
	callee, err := rewritePython(x.Fn, ops)
	if err != nil {
		return nil, err
	}
	if err := checkMethod(x.Fn); err != nil {
		return nil, err
	}
	x.Fn = callee
	if err := rewriteArgs(x.Args, ops); err != nil {
		return nil, err
	}
	if dot, ok := x.Fn.(*syntax.DotExpr); ok {
		if _, isNamespace := namespaceOf(dot); !isNamespace {
			return methodCall(dot, x.Args), nil
		}
	}
	return x, nil
}

// checkCallee refuses a call of anything but a function Homing has or an
// attribute (a method, or a helper under utils, which rewriteDot checks).
func checkCallee(fn syntax.Expr) error {
	switch fn := fn.(type) {
	case *syntax.Ident:
		if !slices.Contains(pyFunctions, fn.Name) {
			return send.Unbuildable("condition: unknown function %q (a condition may call %s)", fn.Name, strings.Join(pyFunctions, ", "))
		}
	case *syntax.DotExpr:
	default:
		return send.Unbuildable("condition: only named functions and methods can be called")
	}
	return nil
}

// checkMethod refuses a call of a method that has no cost (pyMethodCosts).
func checkMethod(fn syntax.Expr) error {
	dot, ok := fn.(*syntax.DotExpr)
	if !ok {
		return nil
	}
	if _, isNamespace := namespaceOf(dot); !isNamespace && pyMethodCosts[dot.Name.Name] == nil {
		return send.Unbuildable("condition: the method .%s() is not allowed (a condition may call %s)", dot.Name.Name, strings.Join(pyMethods(), ", "))
	}
	return nil
}

// rewriteArgs rewrites a call's arguments in place, refusing keyword
// arguments, *args and **kwargs.
func rewriteArgs(args []syntax.Expr, ops pyOps) error {
	for i, a := range args {
		if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			return send.Unbuildable("condition: keyword arguments are not allowed")
		}
		if u, ok := a.(*syntax.UnaryExpr); ok && (u.Op == syntax.STAR || u.Op == syntax.STARSTAR) {
			return send.Unbuildable("condition: *args and **kwargs are not allowed")
		}
		if err := rewriteAll(ops, &args[i]); err != nil {
			return err
		}
	}
	return nil
}

// methodCall is recv.m(args) as pyMethod("m", recv, args), which charges
// the method's cost first.
func methodCall(dot *syntax.DotExpr, args []syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: &syntax.Ident{Name: pyMethodName}, Args: append([]syntax.Expr{stringLiteral(dot.Name.Name), dot.X}, args...)}
}

// rewriteSlice turns x[a:b:c] into pySliced(x)[a:b:c], which charges the
// slice first.
func rewriteSlice(x *syntax.SliceExpr, ops pyOps) (syntax.Expr, error) {
	if err := rewriteAll(ops, &x.X); err != nil {
		return nil, err
	}
	x.X = &syntax.CallExpr{Fn: &syntax.Ident{Name: pySlicedName}, Args: []syntax.Expr{x.X}}
	for _, p := range []*syntax.Expr{&x.Lo, &x.Hi, &x.Step} {
		if *p == nil {
			continue
		}
		if err := rewriteAll(ops, p); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// refuseConstruct names what a condition, one expression without loops or
// definitions, cannot hold.
func refuseConstruct(e syntax.Expr) error {
	switch e.(type) {
	case *syntax.LambdaExpr:
		return send.Unbuildable("condition: lambda is not allowed")
	case *syntax.Comprehension:
		return send.Unbuildable("condition: comprehensions are not allowed")
	case *syntax.DictExpr:
		return send.Unbuildable("condition: dict literals are not allowed")
	}
	return send.Unbuildable("condition: %T is not allowed", e)
}

// namespaceOf reports whether a call's callee is utils.X or frappe.utils.X.
func namespaceOf(fn *syntax.DotExpr) (string, bool) {
	switch x := fn.X.(type) {
	case *syntax.Ident:
		return x.Name, x.Name == "utils"
	case *syntax.DotExpr:
		id, ok := x.X.(*syntax.Ident)
		return "frappe.utils", ok && id.Name == "frappe" && x.Name.Name == "utils"
	}
	return "", false
}

// pyIsToEquals turns Python's `is not` and `is` (outside strings) into
// != and ==, which Starlark lacks; for None, True and False, the only
// operands Frappe conditions use them with, they mean the same.
func pyIsToEquals(src string) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(src); i++ {
		c := src[i]
		if quote != 0 {
			b.WriteByte(c)
			if c == '\\' && i+1 < len(src) {
				i++
				b.WriteByte(src[i])
			} else if c == quote {
				quote = 0
			}
			continue
		}
		if c == '"' || c == '\'' {
			quote = c
			b.WriteByte(c)
			continue
		}
		wordStart := i == 0 || !isWordByte(src[i-1])
		if wordStart && strings.HasPrefix(src[i:], "is") && (i+2 == len(src) || !isWordByte(src[i+2])) {
			rest := strings.TrimLeft(src[i+2:], " \t")
			if strings.HasPrefix(rest, "not") && (len(rest) == 3 || !isWordByte(rest[3])) {
				b.WriteString("!=")
				i = len(src) - len(rest) + 2
				continue
			}
			b.WriteString("==")
			i++
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// match evaluates the condition for doc within MaxTime,
// MaxSteps and MaxPythonBytes; the evaluation runs in
// the caller's goroutine and a timeout cancels its thread, so it stops.
func (c *pyCondition) match(doc map[string]any, now time.Time, limit time.Duration) (bool, error) {
	thread := &starlark.Thread{Name: "condition"}
	thread.SetLocal("homing:now", python.WallIfZero(now))
	thread.SetMaxExecutionSteps(MaxSteps)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	bud := conditionBudget(ctx, limit)
	thread.SetLocal("homing:budget", bud)
	stop := context.AfterFunc(ctx, func() { thread.Cancel("time limit") })
	defer stop()
	v, err := starlark.Call(thread, c.fn, starlark.Tuple{&pyDoc{m: doc, b: bud}}, nil)
	if err := bud.Err(); err != nil {
		return false, stoppedBy(fmt.Sprintf("condition %q", c.src), err)
	}
	if err != nil {
		msg := err.Error()
		var evalErr *starlark.EvalError
		if errors.As(err, &evalErr) {
			msg = evalErr.Msg
		}
		switch {
		case strings.Contains(msg, "too many steps"):
			return false, send.Unbuildable("condition %q: %w", c.src, budget.OverLimit("evaluation needs more than the limit of %d steps", MaxSteps))
		case ctx.Err() != nil:
			return false, stoppedBy(fmt.Sprintf("condition %q", c.src), budget.OverTime("evaluation", limit))
		}
		msg = strings.NewReplacer(pyOpName, "operator", pyMethodName, "method", pySlicedName, "slice").Replace(msg)
		return false, send.Unbuildable("condition %q: %s", c.src, msg)
	}
	return bool(v.Truth()), nil
}

// pyEnv is the environment of the helpers, without doc (the compiled
// condition's parameter).
func pyEnv() starlark.StringDict {
	utils := starlark.StringDict{}
	for _, name := range pyFunctions[4:] {
		utils[name] = newPyBuiltin(name)
	}
	env := starlark.StringDict{
		"utils":      &starlarkstruct.Module{Name: "utils", Members: utils},
		"frappe":     &starlarkstruct.Module{Name: "frappe", Members: starlark.StringDict{"utils": &starlarkstruct.Module{Name: "frappe.utils", Members: utils}}},
		pyOpName:     newPyBuiltin(pyOpName),
		pyMethodName: newPyBuiltin(pyMethodName),
		pySlicedName: newPyBuiltin(pySlicedName),
		"True":       starlark.True,
		"False":      starlark.False,
		"None":       starlark.None,
	}
	for _, name := range pyFunctions[:4] {
		env[name] = newPyBuiltin(name)
	}
	for name, fn := range utils {
		env[name] = fn
	}
	return env
}

// pyOp applies a comparison or arithmetic operator with Python's
// semantics: bool is an int (False == 0, True + 1 == 2), `in` compares
// with ==, and strings or lists built are charged to the budget.
func pyOp(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 3 {
		return nil, errors.New("internal: operator takes 3 arguments")
	}
	opName, _ := starlark.AsString(args[0])
	op := tokenOf(opName)
	x, y := args[1], args[2]
	switch op {
	case syntax.IN, syntax.NOT_IN:
		in, err := pyIn(x, y)
		if err != nil {
			return nil, err
		}
		return starlark.Bool(in == (op == syntax.IN)), nil
	case syntax.EQL, syntax.NEQ:
		eq, err := pyEqual(x, y)
		if err != nil {
			return nil, err
		}
		return starlark.Bool(eq == (op == syntax.EQL)), nil
	case syntax.LT, syntax.GT, syntax.LE, syntax.GE:
		x, y = pyNumeric(x, y)
		ok, err := starlark.Compare(op, x, y)
		if err != nil {
			return nil, fmt.Errorf("%s %s %s: %s", x.Type(), opName, y.Type(), "cannot be compared")
		}
		return starlark.Bool(ok), nil
	}
	x, y = pyNumeric(x, y)
	if err := opCost(budgetOf(thread), op, x, y); err != nil {
		return nil, err
	}
	return starlark.Binary(op, x, y)
}

func tokenOf(s string) syntax.Token {
	for t := syntax.ILLEGAL; t <= syntax.WHILE; t++ {
		if t.String() == s {
			return t
		}
	}
	return syntax.ILLEGAL
}

// sizeOf is the size of a string or list, 0 for other values.
func sizeOf(v starlark.Value) int {
	switch x := v.(type) {
	case starlark.String:
		return len(x)
	case *starlark.List:
		return x.Len() * 8
	case starlark.Tuple:
		return len(x) * 8
	}
	return 0
}

// sizeOfRepeat is the size of s * n before it is built.
func sizeOfRepeat(x, y starlark.Value) (int, bool) {
	seq, n := x, y
	if sizeOf(seq) == 0 {
		seq, n = y, x
	}
	count, err := starlark.AsInt32(n)
	if err != nil || sizeOf(seq) == 0 {
		return 0, false
	}
	if count <= 0 {
		return 0, true
	}
	size := float64(sizeOf(seq)) * float64(count)
	if size > math.MaxInt32 {
		return math.MaxInt32, true
	}
	return int(size), true
}

// pyNumeric turns a bool beside a number (or two bools) into an int, as
// Python's bool is an int.
func pyNumeric(x, y starlark.Value) (starlark.Value, starlark.Value) {
	isNum := func(v starlark.Value) bool {
		switch v.(type) {
		case starlark.Int, starlark.Float, starlark.Bool:
			return true
		}
		return false
	}
	if !isNum(x) || !isNum(y) {
		return x, y
	}
	toInt := func(v starlark.Value) starlark.Value {
		if b, ok := v.(starlark.Bool); ok {
			if b {
				return starlark.MakeInt(1)
			}
			return starlark.MakeInt(0)
		}
		return v
	}
	return toInt(x), toInt(y)
}

// pyEqual is Python's ==: numbers (bools included) by value, other values
// of different types never equal.
func pyEqual(x, y starlark.Value) (bool, error) {
	x, y = pyNumeric(x, y)
	if x.Type() != y.Type() {
		_, xn := x.(starlark.Int)
		_, xf := x.(starlark.Float)
		_, yn := y.(starlark.Int)
		_, yf := y.(starlark.Float)
		if !((xn || xf) && (yn || yf)) {
			return false, nil
		}
	}
	if _, isDoc := x.(*pyDoc); isDoc {
		return x == y, nil
	}
	return starlark.Equal(x, y)
}

// pyIn is Python's `in`: a substring, a key of a document, or an item
// equal (pyEqual) to one of a list's.
func pyIn(x, y starlark.Value) (bool, error) {
	switch c := y.(type) {
	case starlark.String:
		s, ok := x.(starlark.String)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", x.Type())
		}
		return strings.Contains(string(c), string(s)), nil
	case *pyDoc:
		k, ok := x.(starlark.String)
		if !ok {
			return false, nil
		}
		_, found := c.m[string(k)]
		return found, nil
	case starlark.Iterable:
		it := c.Iterate()
		defer it.Done()
		var item starlark.Value
		for it.Next(&item) {
			if eq, err := pyEqual(x, item); err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("argument of type %s is not iterable", y.Type())
}

// pyHelper runs a frappe.utils helper with the template helpers' code.
func pyHelper(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: keyword arguments are not supported", fn.Name())
	}
	in := make([]any, len(args))
	for i, a := range args {
		in[i] = fromStarlark(a)
	}
	now, _ := thread.Local("homing:now").(time.Time)
	out, err := callHelper(now, fn.Name(), in...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn.Name(), err)
	}
	return toStarlark(budgetOf(thread), out)
}

// pyDoc is the document as Frappe's _dict: attributes and keys read its
// fields, a missing one reads None, and doc.get(k, default) works. The
// lists it hands out are built when read, charged to b.
type pyDoc struct {
	m map[string]any
	b *budget.Budget
}

var (
	_ starlark.HasAttrs = (*pyDoc)(nil)
	_ starlark.Mapping  = (*pyDoc)(nil)
	_ starlark.Sequence = (*pyDoc)(nil)
)

func (d *pyDoc) String() string        { return fmt.Sprintf("<document of %d fields>", len(d.m)) }
func (d *pyDoc) Type() string          { return "document" }
func (d *pyDoc) Freeze()               {}
func (d *pyDoc) Truth() starlark.Bool  { return len(d.m) > 0 }
func (d *pyDoc) Hash() (uint32, error) { return 0, errors.New("a document cannot be a key") }
func (d *pyDoc) Len() int              { return len(d.m) }

func (d *pyDoc) Iterate() starlark.Iterator {
	keys := make([]string, 0, len(d.m))
	for k := range d.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	items := make([]starlark.Value, len(keys))
	for i, k := range keys {
		items[i] = starlark.String(k)
	}
	return starlark.NewList(items).Iterate()
}

func (d *pyDoc) Attr(name string) (starlark.Value, error) {
	if name == "get" {
		return starlark.NewBuiltin("get", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var key string
			var def starlark.Value = starlark.None
			if err := starlark.UnpackPositionalArgs("get", args, kwargs, 1, &key, &def); err != nil {
				return nil, err
			}
			if v, ok := d.m[key]; ok {
				return toStarlark(d.b, v)
			}
			return def, nil
		}), nil
	}
	return toStarlark(d.b, d.m[name])
}

func (d *pyDoc) AttrNames() []string {
	names := []string{"get"}
	for k := range d.m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (d *pyDoc) Get(k starlark.Value) (starlark.Value, bool, error) {
	s, ok := k.(starlark.String)
	if !ok {
		return nil, false, fmt.Errorf("document keys are strings, not %s", k.Type())
	}
	v, found := d.m[string(s)]
	if !found {
		return nil, false, fmt.Errorf("KeyError: %q", string(s))
	}
	sv, err := toStarlark(d.b, v)
	return sv, err == nil, err
}

// toStarlark wraps a document value; a list is copied into a Starlark
// list each time it is read, charged to b first (Hold: the document's own
// size limit already bounds each list).
func toStarlark(b *budget.Budget, v any) (starlark.Value, error) {
	switch x := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case int:
		return starlark.MakeInt(x), nil
	case int64:
		return starlark.MakeInt64(x), nil
	case float64:
		return starlark.Float(x), nil
	case float32:
		return starlark.Float(x), nil
	case map[string]any:
		return &pyDoc{m: x, b: b}, nil
	case []any:
		if err := b.Hold(0, budget.MulSize(len(x), 8)); err != nil {
			return nil, err
		}
		items := make([]starlark.Value, len(x))
		for i, item := range x {
			var err error
			if items[i], err = toStarlark(b, item); err != nil {
				return nil, err
			}
		}
		l := starlark.NewList(items)
		l.Freeze()
		return l, nil
	}
	n, err := python.CopyValue(v, false)
	if err == nil {
		switch n.(type) {
		case int, float64, string:
			return toStarlark(b, n)
		}
	}
	return starlark.String(fmt.Sprint(v)), nil
}

// fromStarlark unwraps a value for the helpers.
func fromStarlark(v starlark.Value) any {
	switch x := v.(type) {
	case starlark.NoneType:
		return nil
	case starlark.Bool:
		return bool(x)
	case starlark.String:
		return string(x)
	case starlark.Int:
		if n, ok := x.Int64(); ok {
			return n
		}
		return x.String()
	case starlark.Float:
		return float64(x)
	}
	return v.String()
}

// callHelper runs the frappe.utils helper name (python.Utils) on plain
// values, at now.
func callHelper(now time.Time, name string, args ...any) (any, error) {
	fn, ok := python.Utils(now)[name].(func(...*exec.Value) (any, error))
	if !ok {
		return nil, fmt.Errorf("no helper %q", name)
	}
	in := make([]*exec.Value, len(args))
	for i, a := range args {
		in[i] = exec.AsValue(a)
	}
	return fn(in...)
}
