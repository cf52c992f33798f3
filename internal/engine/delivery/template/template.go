package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/engine/delivery/send"
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
	// MaxRenderTime bounds one rendering. The engine checks the deadline at
	// every step, and no single step can take long (every value it builds
	// is bounded first), so a rendering that passes it stops there, in the
	// caller's goroutine: none is left running.
	MaxRenderTime = time.Second

	// MaxRenderSteps is gonja's missing loop limit: every expression
	// evaluated, every control structure executed, every item a {% for %}
	// walks, every number range() makes and every chunk of output written
	// costs one step. A webhook body for a document with a thousand items
	// needs a few tens of thousands.
	MaxRenderSteps = 500_000

	// MaxRenderedBytes is the default cap on a rendered body and on any one
	// value a template builds; delivery.max_payload_bytes sets it
	// (delivery.Spec.MaxBytes).
	MaxRenderedBytes = 1 << 20

	// RenderMemoryFactor times the body cap is how many bytes of values
	// (strings, list and dict items, counted at their full size) one
	// rendering may build in all, so that a loop cannot fill memory with
	// values it never writes.
	RenderMemoryFactor = 8

	// MaxNesting bounds how deeply brackets, unary operators and
	// block tags nest in a template, so that parsing and evaluation recurse
	// a bounded number of times.
	MaxNesting = 100
)

// The context keys below are not valid template identifiers, so a template
// can neither read nor shadow them.
const loopKey = "homing:loop-items"

// forbiddenStructures are the gonja tags a webhook template may not use.
// include, import, from and extends would read files on the server; macro,
// call and block (through self) let a template call itself, and unbounded
// recursion overflows the Go stack, which no recover can catch; trans has
// no catalogue to translate with.
var forbiddenStructures = []string{"block", "call", "extends", "from", "import", "include", "macro", "trans"}

// templateFilters are the filters a template may use: gonja's, each
// guarded by the rendering's limits (guardFilter).
var templateFilters = []string{
	"abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
	"filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
	"last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
	"replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
	"sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
	"wordwrap", "xmlattr",
}

// templateEnv is built once and never changed afterwards: gonja's sets are
// guarded by their own locks and each rendering works on a child context,
// so one environment serves concurrent Builds.
var templateEnv = sync.OnceValue(func() *exec.Environment { return buildEnv(nil, nil) })

// buildEnv is the guarded environment, with extra filters and globals
// (Frappe's, for compat frappe templates).
func buildEnv(extraFilters map[string]exec.FilterFunction, extraGlobals map[string]any) *exec.Environment {
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
	filters := map[string]exec.FilterFunction{}
	for _, name := range templateFilters {
		f, ok := builtins.Filters.Get(name)
		if !ok {
			panic("gonja lost its " + name + " filter")
		}
		filters[name] = guardFilter(name, f)
	}
	for name, f := range extraFilters {
		filters[name] = guardFilter(name, f)
	}
	for name := range filters {
		if filterCosts[name] == nil {
			panic("filter " + name + " has no cost in filterCosts: a filter that does not charge the budget cannot be registered")
		}
	}
	globals := exec.EmptyContext().Update(builtins.GlobalVariables)
	functions := map[string]any{}
	for _, name := range builtins.GlobalFunctions.Names() {
		functions[name], _ = builtins.GlobalFunctions.Get(name)
	}
	// gonja's range feeds its loop from a goroutine nothing can stop.
	functions["range"] = rangeFunc
	maps.Copy(functions, extraGlobals)
	for name, v := range guardGlobals(functions) {
		globals.Set(name, v)
	}
	checkMethodCosts(builtins.Methods)
	return &exec.Environment{
		Context:           globals,
		Filters:           exec.NewFilterSet(filters),
		Tests:             guardTests(builtins.Tests),
		ControlStructures: exec.NewControlStructureSet(structures),
		Methods:           builtins.Methods,
	}
}

// templateConfig is fresh for every template because gonja's parser holds
// on to the pointer it is given.
func templateConfig() *config.Config {
	cfg := config.New()
	// A variable the document lacks must fail the delivery, not render as
	// an empty string into a JSON body.
	cfg.StrictUndefined = true
	cfg.KnownFilter = func(name string) bool { return slices.Contains(templateFilters, name) }
	return cfg
}

// frappeTemplateConfig reads templates as Frappe renders them
// (frappe/utils/jinja.py, get_jenv: undefined=DebugUndefined): an unknown
// name renders as its tag, a field the document lacks as None (the
// document is Frappe's _dict, whose missing attributes are None).
func frappeTemplateConfig() *config.Config {
	cfg := config.New()
	cfg.DebugUndefined = true
	cfg.KnownFilter = func(name string) bool {
		return slices.Contains(templateFilters, name) || python.Filters()[name] != nil
	}
	return cfg
}

// Validate parses src without rendering it, so that a webhook with
// a broken template is refused when it is created rather than when its
// first delivery is exhausted. Unknown filters are refused here; missing
// document fields and invalid JSON depend on the document, and are found
// by rendering a sample (delivery.Build).
func Validate(src string) (err error) {
	defer recoverInto(&err)
	_, err = parseTemplate(src)
	return err
}

// parseTemplate turns src into a gonja template with the guarded
// environment and no loader beyond the template itself.
func parseTemplate(src string) (*exec.Template, error) {
	return parseTemplateAs(src, false)
}

// parseTemplateAs parses src as a Homing template, or as a Frappe one.
func parseTemplateAs(src string, frappe bool) (*exec.Template, error) {
	if len(src) > budget.MaxSourceBytes {
		return nil, send.Unbuildable("template: %d bytes is more than the limit of %d", len(src), budget.MaxSourceBytes)
	}
	if err := checkNesting(src); err != nil {
		return nil, err
	}
	cfg, env := templateConfig(), templateEnv()
	if frappe {
		if err := refuseDatabaseHelpers(src); err != nil {
			return nil, err
		}
		cfg, env = frappeTemplateConfig(), frappeEnv()
	}
	tpl, err := exec.NewTemplate(rootTemplate, cfg, rootLoader(src), env)
	if err != nil {
		return nil, send.Unbuildable("template: %s", withHint(describeParseError(err)))
	}
	return tpl, nil
}

// blockTags open a block that an end tag closes.
var blockTags = map[string]bool{"if": true, "for": true, "with": true, "filter": true, "autoescape": true, "raw": true}

// checkNesting refuses a template whose brackets, unary operators or blocks
// nest deeper than MaxNesting, before gonja's recursive parser sees
// it.
func checkNesting(src string) error {
	stream := tokens.LexAll(src, templateConfig())
	depth, unary := 0, 0
	var prev *tokens.Token
	for ; !stream.EOF(); stream.Next() {
		tok := stream.Current()
		switch tok.Type {
		case tokens.Error:
			return nil // the parser reports it, with its position
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			depth++
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			depth--
		case tokens.Not, tokens.Addition, tokens.Subtraction:
			unary++
		case tokens.Name:
			if prev != nil && prev.Type == tokens.BlockBegin {
				switch {
				case blockTags[tok.Val]:
					depth++
				case strings.HasPrefix(tok.Val, "end"):
					depth--
				}
			}
			unary = 0
		default:
			unary = 0
		}
		if depth > MaxNesting || unary > MaxNesting {
			return send.Unbuildable("template: line %d col %d: nests deeper than the limit of %d levels", tok.Line, tok.Col, MaxNesting)
		}
		prev = tok
	}
	return nil
}

// renderTemplate renders src with doc bound as `doc`, within MaxRenderTime,
// the step budget and maxBytes, and checks that the result is JSON.
func renderTemplate(src string, doc map[string]any, maxBytes int) ([]byte, error) {
	return Render(src, doc, maxBytes, MaxRenderTime)
}

// Render renders src, a JSON body template, with doc bound as `doc`,
// within limit (delivery.template_time_limit; tests give one they reach
// without a slow template), the step budget and maxBytes (zero is
// MaxRenderedBytes), and checks that the result is JSON. It renders in the
// caller's goroutine: when it returns, the rendering has stopped. Errors
// wrap send.ErrUnbuildable, but a stop that is no verdict
// (budget.NoVerdict).
func Render(src string, doc map[string]any, maxBytes int, limit time.Duration) (body []byte, err error) {
	if maxBytes <= 0 {
		maxBytes = MaxRenderedBytes
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	defer recoverInto(&err)
	return renderJSON(ctx, src, doc, maxBytes, limit)
}

// renderMode says how a rendering writes values and reads the document.
type renderMode struct {
	// text writes each {{ }} as its text (Python's str for None, True
	// and floats, as Jinja in Frappe does) instead of as a JSON value: for
	// URLs and Frappe's templates, whose output is text.
	text bool
	// keepFloats leaves integral floats (1500.0) as floats, so that they
	// render as Python would ("1500.0"); Homing's own templates render them
	// as "1500".
	keepFloats bool
	// frappe reads the template as Frappe does (frappeTemplateConfig) with
	// Frappe's filters and helpers.
	frappe bool
	// now is the time of frappe's date helpers; zero is the wall clock.
	now time.Time
}

func render(ctx context.Context, src string, doc map[string]any, maxBytes int, limit time.Duration, mode ...renderMode) ([]byte, error) {
	var m renderMode
	if len(mode) > 0 {
		m = mode[0]
	}
	tpl, err := parseTemplateAs(src, m.frappe)
	if err != nil {
		return nil, err
	}
	normalized, err := python.CopyDoc(doc, m.keepFloats)
	if err != nil {
		return nil, err
	}

	limits := newRenderLimits(ctx, limit, maxBytes)
	limits.text = m.text
	out := &bodyWriter{limits: limits}
	vars := map[string]any{"doc": normalized}
	if m.frappe {
		// The environment's helpers only stand for the names: these read
		// this render's time.
		maps.Copy(vars, guardGlobals(python.Globals(python.WallIfZero(m.now))))
	}
	data := exec.NewContext(vars)
	execErr := tpl.ExecuteLimited(out, data, limits)
	// The limits' own error wins: gonja ignores some errors (a loop's
	// inline if filter) and buries the others under its own wrapping.
	if err := limits.Err(); err != nil {
		if errors.Is(err, budget.ErrOverloaded) {
			return nil, fmt.Errorf("template: %w", err)
		}
		if errors.Is(err, budget.ErrTimeLimit) {
			return nil, fmt.Errorf("template: %s%w", lineOf(execErr), err)
		}
		if errors.Is(err, budget.ErrLimit) {
			return nil, send.Unbuildable("template: %s%w", lineOf(execErr), err)
		}
		return nil, send.Unbuildable("template: %s%s", lineOf(execErr), err.Error())
	}
	if execErr != nil {
		if unknownName(execErr) {
			return nil, send.Unbuildable("%w", &unknownNameError{msg: "template: " + describeRenderError(execErr)})
		}
		return nil, send.Unbuildable("template: %s", describeRenderError(execErr))
	}
	return out.buf, nil
}

// renderJSON is render followed by the check that the result is JSON.
func renderJSON(ctx context.Context, src string, doc map[string]any, maxBytes int, limit time.Duration) ([]byte, error) {
	body, err := render(ctx, src, doc, maxBytes, limit)
	if err != nil {
		return nil, err
	}
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

// CheckJSON reports where a rendered body stops being JSON, with the text
// around that point, because the usual cause is an unquoted value or a
// string value holding a quote.
func CheckJSON(body []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(body, &raw)
	if err == nil {
		return nil
	}
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		return send.Unbuildable("rendered body is not valid JSON: %s", err.Error())
	}
	// Offset counts the bytes read, the offending one included.
	at := max(0, min(len(body), int(syntax.Offset)-1))
	if int(syntax.Offset) >= len(body) && strings.HasPrefix(syntax.Error(), "unexpected end") {
		at = len(body)
	}
	from, to := max(0, at-20), min(len(body), at+20)
	return send.Unbuildable("rendered body is not valid JSON: %s at offset %d (near %q); every {{ }} is written as one JSON value, or escaped inside a JSON string",
		syntax.Error(), at, body[from:to])
}

// rangeFunc replaces gonja's range, which feeds its loop from a goroutine
// that nothing can stop, with a slice; its guard (globalCosts) has paid for
// the slice's length.
func rangeFunc(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	for _, arg := range params.Args {
		if !arg.IsInteger() {
			return nil, errors.New("range expects integer arguments: range([start, ]stop[, step])")
		}
	}
	if n := len(params.Args); n < 1 || n > 3 {
		return nil, errors.New("range expects 1 to 3 integer arguments: range([start, ]stop[, step])")
	}
	start, stop, step := rangeArgs(params)
	if step == 0 {
		return nil, errors.New("range step cannot be 0")
	}
	count := rangeLen(start, stop, step)
	items := make([]int, 0, count)
	for i := range count {
		items = append(items, start+i*step)
	}
	return items, nil
}

// rangeArgs reads range([start, ]stop[, step]).
func rangeArgs(params *exec.VarArgs) (start, stop, step int) {
	step = 1
	switch len(params.Args) {
	case 1:
		stop = params.Args[0].Integer()
	case 2:
		start, stop = params.Args[0].Integer(), params.Args[1].Integer()
	case 3:
		start, stop, step = params.Args[0].Integer(), params.Args[1].Integer(), params.Args[2].Integer()
	}
	return start, stop, step
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

// guardFilter charges a filter's cost (filterCosts), checks the size of
// what it will build from its arguments before it runs, and charges what
// it built.
func guardFilter(name string, f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		l := limitsOf(e)
		if l == nil {
			return f(e, in, params)
		}
		if err := l.chargeFilter(name, in, params); err != nil {
			return exec.AsValue(err)
		}
		if err := l.beforeFilter(name, in, params); err != nil {
			return exec.AsValue(err)
		}
		out := f(e, in, params)
		if out.IsError() {
			return out
		}
		if name == "tojson" {
			out = exec.AsValue(rawJSON(out.String()))
		}
		if out != in {
			if err := l.Store(nil, out); err != nil {
				return exec.AsValue(err)
			}
		}
		return out
	}
}

// beforeFilter bounds the filters whose output grows with an argument.
func (l *renderLimits) beforeFilter(name string, in *exec.Value, params *exec.VarArgs) error {
	switch name {
	case "center":
		return l.Alloc(budget.AddSize(len(in.String()), max(0, intArg(params, 0, "width"))))
	case "indent":
		s := in.String()
		width := 4
		if len(params.Args) > 0 && params.Args[0].IsString() {
			width = len(params.Args[0].String())
		} else if w := intArg(params, 0, "width"); w != 0 {
			width = w
		}
		return l.Alloc(budget.AddSize(len(s), budget.MulSize(strings.Count(s, "\n")+1, max(0, width))))
	case "wordwrap":
		s := in.String()
		wrap := 1
		if len(params.Args) > 2 {
			wrap = len(params.Args[2].String())
		} else if w, ok := params.KwArgs["wrapstring"]; ok {
			wrap = len(w.String())
		}
		return l.Alloc(budget.AddSize(len(s), budget.MulSize(len(s), wrap)))
	case "batch":
		return l.Alloc(budget.MulSize(8, max(0, intArg(params, 0, "linecount"))))
	case "slice":
		return l.Alloc(budget.MulSize(8, max(0, intArg(params, 0, "slices"))))
	case "tojson":
		if indent := intArg(params, 0, "indent"); indent > 16 || indent < 0 {
			return l.Fail(budget.OverLimit("tojson indent %d is more than the limit of 16", indent))
		}
	case "format":
		return l.Alloc(formatSize(in.String(), params))
	case "replace":
		if len(params.Args) < 2 {
			return nil
		}
		count := -1
		if c := intArg(params, 2, "count"); len(params.Args) > 2 || c != 0 {
			count = c
		}
		return l.Alloc(replaceSize(in.String(), params.Args[0].String(), params.Args[1].String(), count))
	case "join":
		sep := ""
		if len(params.Args) > 0 {
			sep = params.Args[0].String()
		} else if d, ok := params.KwArgs["d"]; ok {
			sep = d.String()
		}
		return l.Alloc(budget.MulSize(len(sep), in.Len()))
	}
	return nil
}

// limitsOfRenderer finds the rendering's limits from a control structure.
func limitsOfRenderer(r *exec.Renderer) *renderLimits {
	l, _ := r.Environment.Limits.(*renderLimits)
	return l
}

var _ io.Writer = (*bodyWriter)(nil)

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
	if b := limitsOfRenderer(r); b != nil {
		if err := b.Charge(1); err != nil {
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
	b := limitsOfRenderer(r)
	if b == nil {
		return g.ForControlStructure.Execute(r, tag)
	}
	if err := b.Charge(1); err != nil {
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
	if err := b.Charge(size); err != nil {
		return err
	}
	// gonja converts every item (a string's every byte, a map's sorted
	// keys) into an exec.Value before the first pass.
	if err := b.Hold(0, budget.MulSize(size, compareItemBytes)); err != nil {
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
	callRe      = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*) is not callable$`)
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

// ErrUnknownName marks a template that uses a name no document can supply:
// a function, variable or test that does not exist (doc's fields are the
// document's business). Creation refuses it even without a sample.
var ErrUnknownName = errors.New("unknown name")

// unknownNameError is a rendering error that matches ErrUnknownName.
type unknownNameError struct{ msg string }

func (e *unknownNameError) Error() string { return e.msg }

func (e *unknownNameError) Unwrap() error { return ErrUnknownName }

// unknownName reports whether a rendering failed on a name other than doc's
// fields, or on an unknown test.
func unknownName(err error) bool {
	leaf := err
	for next := errors.Unwrap(leaf); next != nil; next = errors.Unwrap(leaf) {
		leaf = next
	}
	msg := oneLine(leaf.Error())
	if m := nameRe.FindStringSubmatch(msg); m != nil {
		return m[1] != "doc" && !strings.HasPrefix(m[1], "doc.")
	}
	return testRe.MatchString(msg) || callRe.MatchString(msg)
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
	case callRe.MatchString(msg):
		msg = fmt.Sprintf("unknown function %q", callRe.FindStringSubmatch(msg)[1])
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
// of range and dereferences nil on some inputs) into a send.ErrUnbuildable
// error.
func recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = send.Unbuildable("template: gonja failed on this template: %v", r)
	}
}
