package delivery

import (
	"errors"
	"strings"
	"sync"
	"testing"
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
			cond, err := CompileCondition(tt.src)
			if err != nil {
				t.Fatalf("CompileCondition: %v", err)
			}
			got, err := cond.Match(tt.doc)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrUnbuildable) || !strings.Contains(err.Error(), tt.wantErr) {
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
		{src: strings.Repeat("x", MaxTemplateBytes+1), wantErr: "condition: 65537 bytes is more than the limit of 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.src[:min(len(tt.src), 20)], func(t *testing.T) {
			t.Parallel()
			_, err := CompileCondition(tt.src)
			if err == nil {
				t.Fatalf("CompileCondition(%q) succeeded", tt.src)
			}
			if !errors.Is(err, ErrUnbuildable) {
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

func TestConditionNil(t *testing.T) {
	t.Parallel()

	var cond *Condition
	if ok, err := cond.Match(map[string]any{"a": 1}); !ok || err != nil {
		t.Errorf("nil condition Match = %v, %v; want true, nil", ok, err)
	}
}

func TestConditionConcurrent(t *testing.T) {
	t.Parallel()

	cond, err := CompileCondition(`doc.n % 2 == 0`)
	if err != nil {
		t.Fatalf("CompileCondition: %v", err)
	}
	var wg sync.WaitGroup
	results := make([]bool, 64)
	for i := range results {
		wg.Go(func() {
			results[i], _ = cond.Match(map[string]any{"n": i})
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
	{"HugeRange", `len(1..1000000000) > 0`, "memory budget exceeded"},
	{"NestedMap", `let a=1..1000; len(map(a, map(a, map(a, #)))) > 0`, "limit of"},
	{"StringDoubling", "let a=doc.s+doc.s; let b=a+a; let c=b+b; let d=c+c; let e=d+d; let f=e+e; let g=f+f; let h=g+g; let i=h+h; let j=i+i; let k=j+j; let l=k+k; let m=l+l; let n=m+m; let o=n+n; let p=o+o; let q=p+p; let r=q+q; let s=r+r; let t=s+s; let u=t+t; len(u) > 0", "size limit"},
	{"ReduceDoubling", `reduce(1..100, #acc + #acc, "x") != ""`, "size limit"},
	{"UnknownFunction", `system("id") == ""`, "unknown name system"},
	{"RegexOnBigSubject", `doc.big matches "(a|aa|aaa|aaaa)*(b|bb|bbb){1,100}c"`, "regular expression limit"},
	{"SortBigRange", `len(sortBy(1..1000, {-#})) > 0 && all(1..1000, {all(1..1000, {true})})`, "limit of"},
}

func TestHostileConditionsStopAtALimit(t *testing.T) {
	t.Parallel()

	doc := map[string]any{"s": strings.Repeat("x", 100), "big": strings.Repeat("a", 1<<20)}
	for _, tt := range hostileConditions {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cond, err := CompileCondition(tt.src)
			if err != nil {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
				t.Fatalf("CompileCondition: %v", err)
			}
			got, err := cond.Match(doc)
			if err == nil {
				t.Fatalf("Match = %v, want a limit", got)
			}
			if !errors.Is(err, ErrUnbuildable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want an ErrUnbuildable naming %q", err, tt.want)
			}
		})
	}
}

func TestConditionRefusesAllocatingBuiltins(t *testing.T) {
	t.Parallel()

	for _, src := range []string{`repeat("x", 1000000) != ""`, `replace(doc.s, "x", "yy") != ""`, `join(["a"], "x") != ""`} {
		if _, err := CompileCondition(src); err == nil || !strings.Contains(err.Error(), "unknown name") {
			t.Errorf("CompileCondition(%q) = %v, want the function refused", src, err)
		}
	}
}

// FuzzCondition compiles and evaluates arbitrary conditions under the
// limits: never a panic, and every failure wraps ErrUnbuildable.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{`doc.status == "Paid"`, `all(doc.items, .qty > 1)`, `doc.s + doc.s != ""`, `doc.s matches "a+"`} {
		f.Add(s)
	}
	for _, h := range hostileConditions {
		f.Add(h.src)
	}
	doc := map[string]any{"status": "Paid", "s": "abc", "items": []any{map[string]any{"qty": 2.0}}}
	f.Fuzz(func(t *testing.T, src string) {
		cond, err := CompileCondition(src)
		if err != nil {
			if !errors.Is(err, ErrUnbuildable) {
				t.Fatalf("compile error %v does not wrap ErrUnbuildable", err)
			}
			return
		}
		if _, err := cond.Match(doc); err != nil && !errors.Is(err, ErrUnbuildable) {
			t.Fatalf("match error %v does not wrap ErrUnbuildable", err)
		}
	})
}
