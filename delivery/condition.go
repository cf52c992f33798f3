package delivery

import (
	"errors"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// maxConditionBytes caps a condition's source like a template's.
const maxConditionBytes = MaxTemplateBytes

// Condition decides whether a document change fires a webhook. It is an
// expr-lang expression over `doc`, such as
// `doc.status == "Paid" && doc.grand_total > 100`, compiled once when the
// webhook is loaded and safe to match from many goroutines.
type Condition struct {
	src     string
	program *vm.Program // nil means always true
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
	program, err := expr.Compile(src,
		expr.Env(map[string]any{"doc": map[string]any{}}),
		expr.AllowUndefinedVariables(),
		expr.AsBool(),
		expr.Patch(nilSafeMembers{}),
	)
	if err != nil {
		return nil, unbuildable("condition %q: %s", src, describeExprError(err))
	}
	return &Condition{src: src, program: program}, nil
}

// Match evaluates the condition for doc. A nil or empty condition matches
// everything. Errors wrap ErrUnbuildable: a condition that cannot be
// evaluated for this document will not become evaluable by retrying.
func (c *Condition) Match(doc map[string]any) (matched bool, err error) {
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
	out, err := expr.Run(c.program, map[string]any{"doc": doc})
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
