package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/homingdev/homing/internal/gonja/builtins"
	controlstructures "github.com/homingdev/homing/internal/gonja/builtins/control_structures"
	"github.com/homingdev/homing/internal/gonja/config"
	"github.com/homingdev/homing/internal/gonja/exec"
	"github.com/homingdev/homing/internal/gonja/loaders"
	"github.com/homingdev/homing/internal/gonja/nodes"
	"github.com/homingdev/homing/internal/gonja/parser"
	"github.com/homingdev/homing/internal/gonja/tokens"
)

const (
	// MaxTemplateBytes caps a template's source so that a pasted mistake
	// (or a hostile webhook) cannot make every delivery parse megabytes.
	MaxTemplateBytes = 64 << 10

	// MaxRenderTime bounds one rendering. Rendering runs in its own
	// goroutine and Build gives up after this long; the step budget below
	// normally stops a runaway template well before, and also stops the
	// goroutine, which is otherwise left to finish on its own.
	MaxRenderTime = time.Second

	// MaxRenderSteps is gonja's missing loop limit: every control structure
	// executed, every item a {% for %} walks, every number range() makes and
	// every chunk of output written costs one step. A webhook body for a
	// document with a thousand items needs a few tens of thousands; gonja
	// takes about two microseconds a step, so the budget also keeps a
	// rendering well inside MaxRenderTime.
	MaxRenderSteps = 200_000

	// MaxRenderedBytes caps a rendered body, so that a loop cannot fill
	// memory before the step budget or the time limit stops it.
	MaxRenderedBytes = 1 << 20
)

// The context keys below are not valid template identifiers, so a template
// can neither read nor shadow them.
const (
	budgetKey = "homing:budget"
	loopKey   = "homing:loop-items"
)

// forbiddenStructures are the gonja tags a webhook template may not use.
// include, import, from and extends would read files on the server; macro,
// call and block (through self) let a template call itself, and unbounded
// recursion overflows the Go stack, which no recover can catch; trans has
// no catalogue to translate with.
var forbiddenStructures = []string{"block", "call", "extends", "from", "import", "include", "macro", "trans"}

// templateEnv is built once and never changed afterwards: gonja's sets are
// guarded by their own locks and each rendering works on a child context,
// so one environment serves concurrent Builds.
var templateEnv = sync.OnceValue(func() *exec.Environment {
	structures := map[string]parser.ControlStructureParser{}
	for _, name := range []string{"autoescape", "break", "continue", "do", "filter", "for", "if", "raw", "set", "with"} {
		inner, ok := controlstructures.All.Get(name)
		if !ok {
			panic("gonja lost its " + name + " control structure")
		}
		structures[name] = guardParser(inner)
	}
	for _, name := range forbiddenStructures {
		structures[name] = refuseParser(name)
	}
	return &exec.Environment{
		Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables),
		Filters:           builtins.Filters,
		Tests:             builtins.Tests,
		ControlStructures: exec.NewControlStructureSet(structures),
		Methods:           builtins.Methods,
	}
})

// templateConfig is fresh for every template because gonja's parser holds
// on to the pointer it is given.
func templateConfig() *config.Config {
	cfg := config.New()
	// A variable the document lacks must fail the delivery, not render as
	// an empty string into a JSON body.
	cfg.StrictUndefined = true
	return cfg
}

// ValidateTemplate parses src without rendering it, so that a webhook with
// a broken template is refused when it is created rather than when its
// first delivery is exhausted. It cannot see missing document fields,
// unknown filters or invalid JSON: those depend on the document.
func ValidateTemplate(src string) (err error) {
	defer recoverInto(&err)
	_, err = parseTemplate(src)
	return err
}

// parseTemplate turns src into a gonja template with the guarded
// environment and no loader beyond the template itself.
func parseTemplate(src string) (*exec.Template, error) {
	if len(src) > MaxTemplateBytes {
		return nil, unbuildable("template: %d bytes is more than the limit of %d", len(src), MaxTemplateBytes)
	}
	tpl, err := exec.NewTemplate(rootTemplate, templateConfig(), rootLoader(src), templateEnv())
	if err != nil {
		return nil, unbuildable("template: %s", describeParseError(err))
	}
	return tpl, nil
}

// renderTemplate renders src with doc bound as `doc`, within MaxRenderTime
// and the step budget, and checks that the result is JSON.
func renderTemplate(src string, doc map[string]any) ([]byte, error) {
	return renderWithin(src, doc, MaxRenderTime)
}

type renderResult struct {
	body []byte
	err  error
}

// renderWithin does the work of renderTemplate with a configurable limit,
// so that tests can reach the timeout path without a slow template.
func renderWithin(src string, doc map[string]any, limit time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()

	done := make(chan renderResult, 1)
	go func() {
		var res renderResult
		defer func() { done <- res }()
		defer recoverInto(&res.err)
		res.body, res.err = render(ctx, src, doc, limit)
	}()

	select {
	case res := <-done:
		return res.body, res.err
	case <-ctx.Done():
		// The budget sees the same cancellation and stops the goroutine at
		// its next step; only a single huge operation inside gonja (such
		// as repeating a string a billion times) can keep it running.
		return nil, unbuildable("template: %s", timeLimitMessage(limit))
	}
}

func timeLimitMessage(limit time.Duration) string {
	return fmt.Sprintf("rendering took longer than the limit of %s", limit)
}

func render(ctx context.Context, src string, doc map[string]any, limit time.Duration) ([]byte, error) {
	tpl, err := parseTemplate(src)
	if err != nil {
		return nil, err
	}
	normalized, err := normalizeDoc(doc)
	if err != nil {
		return nil, err
	}

	budget := &renderBudget{ctx: ctx, limit: limit, left: MaxRenderSteps}
	out := &cappedWriter{budget: budget}
	data := exec.NewContext(map[string]any{
		"doc":     normalized,
		"range":   budget.rangeFunc,
		budgetKey: budget,
	})
	execErr := tpl.Execute(out, data)
	// The budget's own error wins: gonja ignores some errors (a loop's
	// inline if filter) and buries the others under its own wrapping.
	if budget.err != nil {
		return nil, unbuildable("template: %s%s", lineOf(execErr), budget.err.Error())
	}
	if execErr != nil {
		return nil, unbuildable("template: %s", describeRenderError(execErr))
	}
	if err := checkJSON(out.buf.Bytes()); err != nil {
		return nil, err
	}
	return out.buf.Bytes(), nil
}

// checkJSON reports where a rendered body stops being JSON, with the text
// around that point, because the usual cause is an unquoted value or a
// string value holding a quote.
func checkJSON(body []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(body, &raw)
	if err == nil {
		return nil
	}
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		return unbuildable("rendered body is not valid JSON: %s", err.Error())
	}
	// Offset counts the bytes read, the offending one included.
	at := max(0, min(len(body), int(syntax.Offset)-1))
	if int(syntax.Offset) >= len(body) && strings.HasPrefix(syntax.Error(), "unexpected end") {
		at = len(body)
	}
	from, to := max(0, at-20), min(len(body), at+20)
	return unbuildable("rendered body is not valid JSON: %s at offset %d (near %q); quote strings and use | tojson for values that may hold quotes",
		syntax.Error(), at, body[from:to])
}

// renderBudget counts the steps of one rendering and notices its deadline.
// Only the rendering goroutine touches it.
type renderBudget struct {
	ctx   context.Context
	limit time.Duration
	left  int
	err   error
}

// charge spends n steps and fails, for good, once the budget or the time is
// used up.
func (b *renderBudget) charge(n int) error {
	if b.err != nil {
		return b.err
	}
	if b.ctx.Err() != nil {
		b.err = errors.New(timeLimitMessage(b.limit))
		return b.err
	}
	if n > b.left {
		b.err = fmt.Errorf("rendering needs more than %d steps; loops over large ranges or nested loops are too big", MaxRenderSteps)
		return b.err
	}
	b.left -= n
	return nil
}

// rangeFunc replaces gonja's range, which feeds its loop from a goroutine
// that nothing can stop, with a slice whose length is paid for up front.
func (b *renderBudget) rangeFunc(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	start, stop, step := 0, 0, 1
	for _, arg := range params.Args {
		if !arg.IsInteger() {
			return nil, errors.New("range expects integer arguments: range([start, ]stop[, step])")
		}
	}
	switch len(params.Args) {
	case 1:
		stop = params.Args[0].Integer()
	case 2:
		start, stop = params.Args[0].Integer(), params.Args[1].Integer()
	case 3:
		start, stop, step = params.Args[0].Integer(), params.Args[1].Integer(), params.Args[2].Integer()
	default:
		return nil, errors.New("range expects 1 to 3 integer arguments: range([start, ]stop[, step])")
	}
	if step == 0 {
		return nil, errors.New("range step cannot be 0")
	}
	count := rangeLen(start, stop, step)
	if err := b.charge(count); err != nil {
		return nil, err
	}
	items := make([]int, 0, count)
	for i := range count {
		items = append(items, start+i*step)
	}
	return items, nil
}

// rangeLen is the number of items range(start, stop, step) yields, worked
// out in floating point so that extreme bounds cannot overflow; anything
// beyond the budget only needs to be large.
func rangeLen(start, stop, step int) int {
	span := (float64(stop) - float64(start)) / float64(step)
	if span <= 0 {
		return 0
	}
	n := math.Ceil(span)
	if n > MaxRenderSteps+1 {
		return MaxRenderSteps + 1
	}
	return int(n)
}

// cappedWriter collects the rendered body, charging a step per write and
// refusing to grow past MaxRenderedBytes.
type cappedWriter struct {
	budget *renderBudget
	buf    bytes.Buffer
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if err := w.budget.charge(1); err != nil {
		return 0, err
	}
	if w.buf.Len()+len(p) > MaxRenderedBytes {
		w.budget.err = fmt.Errorf("rendered body is larger than the limit of %d bytes", MaxRenderedBytes)
		return 0, w.budget.err
	}
	return w.buf.Write(p)
}

// budgetOf finds the rendering's budget in the template context.
func budgetOf(r *exec.Renderer) *renderBudget {
	v, ok := r.Environment.Context.Get(budgetKey)
	if !ok {
		return nil
	}
	b, _ := v.(*renderBudget)
	return b
}

// guardParser wraps a gonja control structure parser so that every
// execution of the structure costs a step, which is what stops nested loops
// whose bodies write nothing.
func guardParser(inner parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := inner(p, args)
		if err != nil {
			return nil, err
		}
		if loop, ok := cs.(*controlstructures.ForControlStructure); ok {
			if loop.Recursive {
				return nil, syntaxError(p, "recursive loops are not supported in webhook templates")
			}
			return &guardedFor{ForControlStructure: loop}, nil
		}
		executable, ok := cs.(exec.ControlStructure)
		if !ok {
			return cs, nil
		}
		return &guardedStructure{ControlStructure: executable}, nil
	}
}

type guardedStructure struct {
	exec.ControlStructure
}

func (g *guardedStructure) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if b := budgetOf(r); b != nil {
		if err := b.charge(1); err != nil {
			return err
		}
	}
	return g.ControlStructure.Execute(r, tag)
}

// guardedFor evaluates the loop's iterable itself so that it can charge
// one step per item before gonja copies the items, then hands gonja the
// evaluated value under a name no template can write.
type guardedFor struct {
	*controlstructures.ForControlStructure
}

func (g *guardedFor) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	b := budgetOf(r)
	if b == nil {
		return g.ForControlStructure.Execute(r, tag)
	}
	if err := b.charge(1); err != nil {
		return err
	}
	items := r.Eval(g.ObjectEvaluator)
	if items.IsError() {
		return items
	}
	size := 0
	if s, ok := items.Interface().(string); ok {
		size = len(s)
	} else {
		size = items.Len()
	}
	if err := b.charge(size); err != nil {
		return err
	}
	sub := r.Inherit()
	sub.Environment.Context.Set(loopKey, items)
	loop := *g.ForControlStructure
	pos := g.ObjectEvaluator.Position()
	loop.ObjectEvaluator = &nodes.Name{Name: &tokens.Token{Type: tokens.Name, Val: loopKey, Line: pos.Line, Col: pos.Col}}
	return loop.Execute(sub, tag)
}

// refuseParser rejects a forbidden tag with a syntax error that names it.
func refuseParser(name string) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		return nil, syntaxError(p, fmt.Sprintf("{%% %s %%} is not supported in webhook templates", name))
	}
}

// syntaxError reports msg at the line the parser is on; the column would
// point past the tag, which misleads more than it helps.
func syntaxError(p *parser.Parser, msg string) error {
	line := 0
	if tok := p.Current(); tok != nil {
		line = tok.Line
	}
	return &parser.SyntaxError{Message: msg, Line: line}
}

const rootTemplate = "webhook-template"

// onlyRoot is a gonja loader that knows the template being built and
// nothing else, so no tag can reach the file system.
type onlyRoot struct{ src string }

func rootLoader(src string) *onlyRoot { return &onlyRoot{src: src} }

func (l *onlyRoot) Read(path string) (io.Reader, error) {
	if path != rootTemplate {
		return nil, fmt.Errorf("webhook templates cannot load %q", path)
	}
	return strings.NewReader(l.src), nil
}

func (l *onlyRoot) Resolve(path string) (string, error) {
	if path != rootTemplate {
		return "", fmt.Errorf("webhook templates cannot load %q", path)
	}
	return path, nil
}

func (l *onlyRoot) Inherit(string) (loaders.Loader, error) { return l, nil }

var (
	lineRe      = regexp.MustCompile(`at line (\d+)`)
	undefinedRe = regexp.MustCompile(`(?i)unable to evaluate ([^\s:]+): (?:attribute|item) .* not found$`)
	nameRe      = regexp.MustCompile(`Unable to evaluate name "([^"]*)"`)
	filterRe    = regexp.MustCompile(`filter '([^']*)' not found`)
	testRe      = regexp.MustCompile(`test '([^']*)' not found`)
)

// describeParseError turns gonja's parse error, which quotes the whole
// template, into one line with the position of the problem.
func describeParseError(err error) string {
	var syntax *parser.SyntaxError
	if errors.As(err, &syntax) {
		switch {
		case syntax.Line > 0 && syntax.Column > 0:
			return oneLine(fmt.Sprintf("line %d col %d: %s", syntax.Line, syntax.Column, syntax.Message))
		case syntax.Line > 0:
			return oneLine(fmt.Sprintf("line %d: %s", syntax.Line, syntax.Message))
		}
		return oneLine(syntax.Message)
	}
	if inner := errors.Unwrap(err); inner != nil {
		return oneLine(inner.Error())
	}
	return oneLine(err.Error())
}

// describeRenderError turns gonja's chain of wrapped messages into one line
// that names the innermost line number and what was wrong there.
func describeRenderError(err error) string {
	leaf := err
	for next := errors.Unwrap(leaf); next != nil; next = errors.Unwrap(leaf) {
		leaf = next
	}
	msg := oneLine(leaf.Error())
	switch {
	case undefinedRe.MatchString(msg):
		msg = fmt.Sprintf("unknown variable %q", undefinedRe.FindStringSubmatch(msg)[1])
	case nameRe.MatchString(msg):
		msg = fmt.Sprintf("unknown variable %q", nameRe.FindStringSubmatch(msg)[1])
	case filterRe.MatchString(msg):
		msg = fmt.Sprintf("unknown filter %q", filterRe.FindStringSubmatch(msg)[1])
	case testRe.MatchString(msg):
		msg = fmt.Sprintf("unknown test %q", testRe.FindStringSubmatch(msg)[1])
	}
	return lineOf(err) + msg
}

// lineOf returns "line N: " for the innermost line gonja mentions in err,
// or nothing.
func lineOf(err error) string {
	if err == nil {
		return ""
	}
	matches := lineRe.FindAllStringSubmatch(err.Error(), -1)
	if len(matches) == 0 {
		return ""
	}
	line, convErr := strconv.Atoi(matches[len(matches)-1][1])
	if convErr != nil {
		return ""
	}
	return fmt.Sprintf("line %d: ", line)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// recoverInto turns a panic inside gonja (it divides by zero, indexes out
// of range and dereferences nil on some inputs) into an ErrUnbuildable
// error.
func recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = unbuildable("template: gonja failed on this template: %v", r)
	}
}
