package condition

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

func TestConditionMatch(t *testing.T) {
	t.Parallel()

	paid := map[string]any{"status": "Paid", "grand_total": 1500.0, "items": []any{map[string]any{"qty": 2.0}}}
	tests := []struct {
		name    string
		src     string
		doc     map[string]any
		want    bool
		wantErr string
	}{
		{name: "Empty", src: "", doc: nil, want: true},
		{name: "True", src: `doc.status == "Paid" && doc.grand_total > 100`, doc: paid, want: true},
		{name: "FalseByAmount", src: `doc.status == "Paid" && doc.grand_total > 10000`, doc: paid, want: false},
		{name: "FalseByStatus", src: `doc.status == "Draft"`, doc: paid, want: false},
		{name: "Nested", src: `doc.items[0].qty >= 2`, doc: paid, want: true},
		{name: "MissingFieldEquality", src: `doc.status == "Paid"`, doc: map[string]any{}, want: false},
		{name: "MissingFieldNil", src: `doc.status == nil`, doc: nil, want: true},
		{name: "MissingFieldGuarded", src: `doc.x != nil && doc.x > 1`, doc: paid, want: false},
		{name: "MissingFieldOrdering", src: `doc.x > 1`, doc: paid, wantErr: `condition "doc.x > 1": `},
		{name: "MissingNested", src: `doc.a.b.c == 1`, doc: paid, want: false},
		{name: "MissingNestedIsNil", src: `doc.a["b"].c == nil`, doc: paid, want: true},
		{name: "Predicate", src: `all(doc.items, .qty > 1) && none(doc.items, .missing == 1)`, doc: paid, want: true},
		{name: "ExplicitOptional", src: `doc?.a?.b == nil`, doc: paid, want: true},
		{name: "NotBool", src: `doc.status`, doc: paid, wantErr: `condition "doc.status": line 1 col 1: invalid operation`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cond, err := Compile(tt.src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, err := untimedMatch(cond, tt.doc)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Match = %v, %v; want an ErrUnbuildable containing %q", got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompileConditionErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		src     string
		wantErr string
	}{
		{src: `doc.status ==`, wantErr: `condition "doc.status ==": line 1 col`},
		{src: `doc.status = "Paid"`, wantErr: `condition "doc.status = \"Paid\"": line 1 col`},
		{src: `1 + 2`, wantErr: "expected bool"},
		{src: strings.Repeat("x", budget.MaxSourceBytes+1), wantErr: "condition: 65537 bytes is more than the limit of 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.src[:min(len(tt.src), 20)], func(t *testing.T) {
			t.Parallel()
			_, err := Compile(tt.src)
			if err == nil {
				t.Fatalf("Compile(%q) succeeded", tt.src)
			}
			if !errors.Is(err, send.ErrUnbuildable) {
				t.Errorf("error %v does not wrap ErrUnbuildable", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error =\n%s\nwant it to contain\n%s", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// A condition written with `=` is refused with the fix it most likely
// needs.
func TestAssignmentHintsAtComparison(t *testing.T) {
	t.Parallel()
	_, err := Compile(`doc.status = "Paid"`)
	if err == nil || !strings.Contains(err.Error(), "did you mean `==`?") {
		t.Errorf("condition with =: %v; want it to suggest ==", err)
	}
}

func TestConditionNil(t *testing.T) {
	t.Parallel()

	var cond *Condition
	if ok, err := untimedMatch(cond, map[string]any{"a": 1}); !ok || err != nil {
		t.Errorf("nil condition Match = %v, %v; want true, nil", ok, err)
	}
}

func TestConditionConcurrent(t *testing.T) {
	t.Parallel()

	cond, err := Compile(`doc.n % 2 == 0`)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	var wg sync.WaitGroup
	results := make([]bool, 64)
	for i := range results {
		wg.Go(func() {
			results[i], _ = untimedMatch(cond, map[string]any{"n": i})
		})
	}
	wg.Wait()
	for i, got := range results {
		if got != (i%2 == 0) {
			t.Errorf("Match(n=%d) = %v", i, got)
		}
	}
}

// hostileConditions are conditions that would take a worker's time or
// memory without the limits.
var hostileConditions = []struct{ name, src, want string }{
	{"NestedAll", `let a=1..1000; all(a,{all(a,{all(a,{true})})})`, "limit of"},
	{"NestedAllDeeper", `let a=1..1000; all(a,{all(a,{all(a,{all(a,{true})})})})`, "limit of"},
	{"HugeRange", `len(1..1000000000) > 0`, "size limit"},
	{"NestedMap", `let a=1..1000; len(map(a, map(a, map(a, #)))) > 0`, "limit of"},
	{"StringDoubling", "let a=doc.s+doc.s; let b=a+a; let c=b+b; let d=c+c; let e=d+d; let f=e+e; let g=f+f; let h=g+g; let i=h+h; let j=i+i; let k=j+j; let l=k+k; let m=l+l; let n=m+m; let o=n+n; let p=o+o; let q=p+p; let r=q+q; let s=r+r; let t=s+s; let u=t+t; len(u) > 0", "size limit"},
	{"ReduceDoubling", `reduce(1..100, #acc + #acc, "x") != ""`, "size limit"},
	{"UnknownFunction", `system("id") == ""`, "unknown name system"},
	{"RegexOnBigSubject", `doc.big matches "(a|aa|aaa|aaaa)*(b|bb|bbb){1,100}c"`, "regular expression limit"},
	{"SortBigRange", `len(sortBy(1..1000, {-#})) > 0 && all(1..1000, {all(1..1000, {true})})`, "limit of"},
}

// builtinConditions are the conditions of issue 25 and their variants:
// expr's built-ins building values no step counted.
var builtinConditions = []struct{ name, src, want string }{
	// 221 bytes: each level doubles the string; 26 levels took a worker to
	// 1.38 GB.
	{"NestedToJSON", "len(" + strings.Repeat("toJSON(", 26) + `"\""` + strings.Repeat(")", 26) + ") > 0", "size limit"},
	{"NestedToJSONDeeper", "len(" + strings.Repeat("toJSON(", 40) + `"\""` + strings.Repeat(")", 40) + ") > 0", "size limit"},
	// With a 1 MB field: 3.2 GB and 21 s, and then false without an error.
	{"SplitToJSONRepeated", strings.Repeat(`len(toJSON(split(doc.big, ""))) == 3 || `, 199) + `len(toJSON(split(doc.big, ""))) == 3`, "size limit"},
	{"NestedToJSONOfDoc", `len(toJSON(toJSON(toJSON(toJSON(doc))))) > 0`, "size limit"},
	{"ToJSONOfDocRepeated", strings.Repeat(`len(toJSON(doc.mid)) == 1 || `, 150) + "false", "limit of"},
	{"StringOfDoc", strings.Repeat(`len(string(doc)) == 1 || `, 150) + "false", "limit"},
	{"FromJSON", `len(fromJSON(doc.json)) > 0`, "size limit"},
	{"FromJSONRepeated", strings.Repeat(`len(fromJSON(doc.smalljson)) == 1 || `, 150) + "false", "limit of"},
	{"SplitInPredicate", `all(1..1000, len(split(doc.mid, "")) > 0)`, "limit of"},
	{"MapOverSplit", `len(map(split(doc.big, ""), # + #)) > 0`, "size limit"},
	{"FilterOverSplit", `len(filter(split(doc.mid, "a"), # == "")) > 0 && len(filter(split(doc.mid, "a"), # == "")) > 0 && len(filter(split(doc.mid, "a"), # == "")) > 0`, "limit"},
	{"UpperRepeated", strings.Repeat(`upper(doc.mid) == "" || `, 150) + "false", "limit of"},
	{"PipeToJSON", `doc.big | toJSON() | len() > 0`, "size limit"},
	{"ToPairsOfSplit", `len(toPairs(groupBy(split(doc.mid, ""), #))) > 0 && len(toPairs(groupBy(split(doc.mid, ""), #))) > 0`, "limit"},
	{"FlattenConcat", `len(flatten(concat(split(doc.mid, ""), split(doc.mid, ""), split(doc.mid, "")))) > 0`, "size limit"},
	{"ConcatGrowth", `reduce(1..64, concat(#acc, #acc), [1]) != nil`, "size limit"},
	{"RepeatByPlus", `reduce(1..64, #acc + #acc, doc.s) != ""`, "size limit"},
	{"RangeInPredicate", `all(1..100000, len(1..100000) > 0)`, "limit"},
	{"RangeFromDoc", `len(1..doc.width) > 0`, "size limit"},
	{"InOverLargeList", `all(1..100000, # in doc.list)`, "limit of"},
	{"LiteralsInPredicate", `all(1..100000, len([#, #, #, #, #, #, #, #, #, #, #, #, #, #, #, #]) > 0)`, "limit"},
	{"SortBig", `len(sort(doc.list)) > 0 && len(sort(doc.list)) > 0 && len(sortBy(doc.list, -#)) > 0`, "limit"},
}

// hostileDoc is the document the hostile conditions read.
func hostileConditionDoc() map[string]any {
	list := make([]any, 50_000)
	for i := range list {
		list[i] = float64(i)
	}
	return map[string]any{
		"s": strings.Repeat("x", 100), "big": strings.Repeat("a", 1<<20), "mid": strings.Repeat("a", 100_000),
		"json": "[" + strings.Repeat("0,", 250_000) + "0]", "smalljson": "[" + strings.Repeat("0,", 10_000) + "0]",
		"width": 100_000_000_000, "list": list,
	}
}

// maxHostileAlloc bounds what compiling and evaluating one hostile
// condition may allocate in all (TotalAlloc); issue 25's reproductions
// allocated from 366 MiB to 7 GiB.
const maxHostileAlloc = 64 << 20

// TestConditionBuiltinsAreCharged evaluates issue 25's conditions: each
// stops at a limit of the evaluation's budget (not its time limit), and
// compiling and evaluating it together allocate less than maxHostileAlloc.
// Not parallel: TotalAlloc counts the whole process.
func TestConditionBuiltinsAreCharged(t *testing.T) {
	doc := hostileConditionDoc()
	for _, tt := range builtinConditions {
		t.Run(tt.name, func(t *testing.T) {
			var before, compiled, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cond, err := Compile(tt.src)
			runtime.ReadMemStats(&compiled)
			if err != nil {
				t.Fatalf("Compile: %.300v", err)
			}
			// The time limit out of reach: the budget, not the clock of a
			// loaded machine, must stop each of these.
			got, err := cond.MatchWithin(doc, time.Time{}, outOfReach)
			runtime.ReadMemStats(&after)
			if compiledAlloc := compiled.TotalAlloc - before.TotalAlloc; compiledAlloc > 4<<20 {
				t.Errorf("compiling allocated %d MiB: something was evaluated at compile", compiledAlloc>>20)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("compiling and evaluating allocated %d KiB", alloc>>10)
			if alloc > maxHostileAlloc {
				t.Errorf("compiling and evaluating allocated %d MiB, more than %d MiB", alloc>>20, maxHostileAlloc>>20)
			}
			if err == nil {
				t.Fatalf("Match = %v, want a limit", got)
			}
			if !errors.Is(err, send.ErrUnbuildable) || !errors.Is(err, budget.ErrLimit) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %.300v, want an ErrUnbuildable ErrLimit naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "time limit") {
				t.Errorf("error = %.300v, want a limit of the budget met before its time limit", err)
			}
		})
	}
}

// Validation at creation (homing serve, the CLI) compiles a condition and
// evaluates it against the empty document or a sample: the literal ones
// meet the same limit there as in the worker.
func TestLiteralBuiltinConditionsAreRefusedWithAnEmptyDocument(t *testing.T) {
	t.Parallel()
	for _, tt := range builtinConditions[:2] {
		cond, err := Compile(tt.src)
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		if got, err := untimedMatch(cond, nil); !errors.Is(err, budget.ErrLimit) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Match(empty) = %v, %.200v; want a limit naming %q", tt.name, got, err, tt.want)
		}
	}
}

// Every built-in expr has is either charged by builtinCosts or disabled,
// so a built-in added by an expr upgrade cannot be called uncharged; and
// the patch routes a call of each charged one through Before.
func TestEveryBuiltinIsChargedOrDisabled(t *testing.T) {
	t.Parallel()
	for _, f := range builtin.Builtins {
		if _, ok := builtinCosts[f.Name]; !ok {
			if _, err := Compile(f.Name + "(doc) != nil"); err == nil || !strings.Contains(err.Error(), "unknown name "+f.Name) {
				t.Errorf("built-in %s has no cost, and Compile(%q) = %v; want it disabled", f.Name, f.Name+"(doc)", err)
			}
			continue
		}
		if (builtinCosts[f.Name].predicate) != f.Predicate {
			t.Errorf("built-in %s: cost table says predicate=%v, expr %v", f.Name, builtinCosts[f.Name].predicate, f.Predicate)
		}
		var node ast.Node = &ast.BuiltinNode{Name: f.Name, Arguments: []ast.Node{&ast.IdentifierNode{Value: "doc"}}}
		newLimitPatch().Visit(&node)
		if !strings.Contains(node.String(), limitsKey+`_Before(`+limitsKey+`, "`+f.Name+`"`) {
			t.Errorf("built-in %s patched into %s, not a call through Before", f.Name, node)
		}
	}
	for name := range builtinCosts {
		if _, ok := builtin.Index[name]; !ok {
			t.Errorf("builtinCosts has %s, which expr does not", name)
		}
	}
}

// A built-in's cost holds wherever its call is: nested in a predicate, in
// a pipe, in an argument; a built-in's name used as a value is not a call
// (it reads as nil in expr), so it cannot run uncharged.
func TestBuiltinCallsAreChargedEverywhere(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"big": strings.Repeat("<", 200_000), "items": []any{1.0, 2.0}}
	for _, src := range []string{
		`toJSON(doc.big) != ""`,
		`any(doc.items, toJSON(doc.big) != "")`,
		`any(doc.items, {any(doc.items, {len(toJSON(doc.big)) > 0})})`,
		`(doc.big | toJSON()) != ""`,
		`len(upper(toJSON(doc.big))) > 0`,
		`doc.items[0] == 1 ? toJSON(doc.big) != "" : false`,
		`let f = toJSON(doc.big); f != ""`,
	} {
		cond, err := Compile(src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if got, err := untimedMatch(cond, doc); !errors.Is(err, budget.ErrLimit) || !strings.Contains(err.Error(), "size limit") {
			t.Errorf("Match(%q) = %v, %.200v; want the size limit (toJSON escapes each < as 6 bytes)", src, got, err)
		}
	}
	for _, tt := range []struct {
		src  string
		want bool
	}{{`let f = toJSON; f(doc.big) != ""`, false}, {`map(doc.items, toJSON)[0] == nil`, true}} {
		cond, err := Compile(tt.src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.src, err)
		}
		if got, err := untimedMatch(cond, doc); got != tt.want || errors.Is(err, budget.ErrLimit) {
			t.Errorf("Match(%q) = %v, %v; want %v without a limit: a built-in used as a value is nil", tt.src, got, err, tt.want)
		}
	}
}

// Charging keeps what conditions did: built-ins give their answers, a
// mistyped call is still refused at compile, with its position, and `in`
// a literal list or constant range is still optimized.
func TestChargedBuiltinsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"name": "SO-0001", "status": "Paid", "items": []any{map[string]any{"qty": 2.0}, map[string]any{"qty": 5.0}}, "n": 3.0, "tags": []any{"a", "b"}}
	for _, src := range []string{
		`upper(doc.status) == "PAID" && lower("X") == "x" && trim("  a ") == "a"`,
		`len(split(doc.name, "-")) == 2 && split(doc.name, "-")[1] == "0001"`,
		`toJSON(doc.tags) == "[\n  \"a\",\n  \"b\"\n]" && fromJSON("[1,2]")[1] == 2`,
		`sum(map(doc.items, .qty)) == 7 && max(1, 3) == 3 && len(filter(doc.items, .qty > 2)) == 1`,
		`doc.status in ["Paid", "Draft", "Cancelled", "Overdue", "Unpaid", "Submitted"]`,
		`2 in 1..5 && !(7 in 1..5) && doc.n in 1..doc.n && "b" in doc.tags`,
		`len([1, 2, 3, 4, 5, 6, 7]) == 7 && {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}.e == 5`,
		`doc.name + "-x" == "SO-0001-x" && "a" + "b" == "ab" && 1 + 2 == 3`,
		`sortBy(doc.items, -.qty)[0].qty == 5 && sort([3, 1, 2])[0] == 1 && reduce(1..4, #acc + #, 0) == 10`,
		`keys({"a": 1})[0] == "a" && toPairs({"a": 1})[0][1] == 1 && fromPairs([["a", 1]]).a == 1`,
		`flatten([[1], [2, [3]]])[2] == 3 && concat([1], [2])[1] == 2 && uniq([1, 1])[0] == 1 && reverse([1, 2])[0] == 2`,
		`toBase64("hi") == "aGk=" && fromBase64("aGk=") == "hi" && string(1) == "1" && int("2") == 2 && type(1) == "int"`,
		`groupBy(doc.items, .qty > 2)[true][0].qty == 5 && take([1, 2, 3], 2)[1] == 2 && median([1, 2, 3]) == 2`,
		`doc.status | lower() | hasPrefix("pa")`,
	} {
		cond, err := Compile(src)
		if err != nil {
			t.Errorf("Compile(%q): %v", src, err)
			continue
		}
		if got, err := untimedMatch(cond, doc); err != nil || !got {
			t.Errorf("Match(%q) = %v, %v; want true", src, got, err)
		}
	}
	for _, tt := range []struct{ src, want string }{
		{`upper(1) == "1"`, "line 1 col 7: cannot use int as argument (type string) to call upper"},
		{`len(split(1, "")) > 0`, "line 1 col 5: not enough arguments to call split"}, // expr's own words
		{`trim(doc.a, 1) == ""`, "line 1 col 13: cannot use int as argument (type string) to call trim"},
		{`1 + "a" == 1`, "line 1 col 3: invalid operation: + (mismatched types int and string)"},
	} {
		if _, err := Compile(tt.src); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%q) = %v, want %q", tt.src, err, tt.want)
		}
	}
}

func TestHostileConditionsStopAtALimit(t *testing.T) {
	t.Parallel()

	doc := map[string]any{"s": strings.Repeat("x", 100), "big": strings.Repeat("a", 1<<20)}
	for _, tt := range hostileConditions {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cond, err := Compile(tt.src)
			if err != nil {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
				t.Fatalf("Compile: %v", err)
			}
			got, err := untimedMatch(cond, doc)
			if err == nil {
				t.Fatalf("Match = %v, want a limit", got)
			}
			if !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want an ErrUnbuildable naming %q", err, tt.want)
			}
		})
	}
}

// The charges the patched program makes cannot be called by a condition:
// __homing_Pay(__homing, 0, -100000000) would otherwise give it budget.
func TestConditionCannotCallItsCharges(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`__homing_Pay(__homing, 0, -100000000) != nil && len(toJSON(doc)) > 0`,
		`__homing.Step(1) == 1`,
		`$env["__homing"] != nil`,
	} {
		if _, err := Compile(src); err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), "names starting with __homing are Homing's own") {
			t.Errorf("Compile(%q) = %v, want it refused", src, err)
		}
	}
}

func TestConditionRefusesAllocatingBuiltins(t *testing.T) {
	t.Parallel()

	for _, src := range []string{`repeat("x", 1000000) != ""`, `replace(doc.s, "x", "yy") != ""`, `join(["a"], "x") != ""`} {
		if _, err := Compile(src); err == nil || !strings.Contains(err.Error(), "unknown name") {
			t.Errorf("Compile(%q) = %v, want the function refused", src, err)
		}
	}
}

// FuzzCondition compiles and evaluates arbitrary conditions under the
// limits: never a panic, and every failure wraps ErrUnbuildable (or
// ErrOverloaded, past the heap ceiling of a process run with a memory
// limit). The time limit is out of reach: steps and sizes stop every
// condition, so no outcome depends on the machine.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{`doc.status == "Paid"`, `all(doc.items, .qty > 1)`, `doc.s + doc.s != ""`, `doc.s matches "a+"`} {
		f.Add(s)
	}
	for _, h := range hostileConditions {
		f.Add(h.src)
	}
	for _, h := range builtinConditions {
		f.Add(h.src)
	}
	doc := map[string]any{"status": "Paid", "s": "abc", "items": []any{map[string]any{"qty": 2.0}}}
	f.Fuzz(func(t *testing.T, src string) {
		cond, err := Compile(src)
		if err != nil {
			if !errors.Is(err, send.ErrUnbuildable) {
				t.Fatalf("compile error %v does not wrap ErrUnbuildable", err)
			}
			return
		}
		if _, err := untimedMatch(cond, doc); err != nil && !errors.Is(err, send.ErrUnbuildable) && !errors.Is(err, budget.ErrOverloaded) {
			t.Fatalf("match error %v wraps neither ErrUnbuildable nor ErrOverloaded", err)
		}
	})
}
