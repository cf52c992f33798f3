package template

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

func TestValidateTemplate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		src     string
		wantErr string // empty: valid
	}{
		{name: "Frappe", src: `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`},
		// Missing fields are the document's business, not the template's.
		{name: "UnknownFieldIsFine", src: `{{ doc.whatever }}`},
		{name: "LoopsAndConditions", src: `{% for i in doc.items %}{% if i.qty > 1 %}{% break %}{% endif %}{% endfor %}`},
		{name: "UnclosedTag", src: `{% if doc.paid %}yes`, wantErr: "template: "},
		{name: "UnclosedExpression", src: `{{ doc.name `, wantErr: `template: line 1 col 13: '}}' expected here`},
		{name: "Macro", src: `{% macro m() %}{{ m() }}{% endmacro %}`, wantErr: `template: line 1: {% macro %} is not supported in webhook templates`},
		{name: "Block", src: "\n{% block b %}{{ self.b() }}{% endblock %}", wantErr: `template: line 2: {% block %} is not supported`},
		{name: "Extends", src: `{% extends "/etc/passwd" %}`, wantErr: `{% extends %} is not supported`},
		{name: "Import", src: `{% import "x" as y %}`, wantErr: `{% import %} is not supported`},
		{name: "Call", src: `{% call m() %}{% endcall %}`, wantErr: `{% call %} is not supported`},
		{name: "RecursiveLoop", src: `{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}`, wantErr: `recursive loops are not supported`},
		{name: "Oversize", src: strings.Repeat(" ", budget.MaxSourceBytes+1), wantErr: "template: 65537 bytes is more than the limit of 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Validate(tt.src)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %q", tt.src)
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

func TestRenderTemplateFeatures(t *testing.T) {
	t.Parallel()

	doc := map[string]any{"n": 3.0, "items": []any{"a", "b", "c"}}
	tests := []struct {
		name string
		src  string
		want string
	}{
		{name: "Range", src: `{{ range(1, 7, 2) | list | tojson }}`, want: `[1,3,5]`},
		{name: "NegativeRange", src: `{{ range(3, 0, -1) | list | tojson }}`, want: `[3,2,1]`},
		{name: "EmptyRange", src: `{{ range(0) | list | tojson }}`, want: `[]`},
		{name: "BreakAndContinue", src: `[{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }},{% endfor %}0]`, want: `[0,2,3,0]`},
		{name: "LoopElse", src: `{% for i in [] %}1{% else %}"empty"{% endfor %}`, want: `"empty"`},
		{name: "LoopOverDictItems", src: `{% for k, v in {"a": 1}.items() %}{"{{ k }}": {{ v }}}{% endfor %}`, want: `{"a": 1}`},
		{name: "Namespace", src: `{% set ns = namespace(total=0) %}{% for i in range(doc.n) %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}`, want: `3`},
		{name: "IntegralNumbersPrintAsInts", src: `"INV-{{ doc.n }}"`, want: `"INV-3"`},
		{name: "LoopVariable", src: `[{% for x in doc.items %}"{{ loop.index }}{{ x }}"{% if not loop.last %},{% endif %}{% endfor %}]`, want: `["1a","2b","3c"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := untimedRender(tt.src, doc, 0)
			if err != nil {
				t.Fatalf("renderTemplate: %v", err)
			}
			if string(body) != tt.want {
				t.Errorf("body = %q, want %q", body, tt.want)
			}
		})
	}
}

func TestRenderTemplateRangeErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		src     string
		wantErr string
	}{
		{src: `{{ range(1, 2, 0) | list }}`, wantErr: "range step cannot be 0"},
		{src: `{{ range("x") | list }}`, wantErr: "range expects integer arguments"},
		{src: `{{ range() | list }}`, wantErr: "range expects 1 to 3 integer arguments"},
		{src: `{{ range(9223372036854775807) | list }}`, wantErr: "rendering needs more than the limit of 500000 steps"},
		{src: `{{ range(-9223372036854775807, 9223372036854775807, 9223372036854775807) | list | tojson }}`, wantErr: ""},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			_, err := untimedRender(tt.src, nil, 0)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("renderTemplate: %v", err)
				}
				return
			}
			if !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRenderTemplateTimeLimit(t *testing.T) {
	t.Parallel()

	// With a limit that has passed before rendering starts, both the
	// watchdog and the budget must report the time limit, which is no
	// verdict on the template (load elsewhere can reach it): not
	// ErrUnbuildable.
	_, err := Render(`{% for i in range(10) %}{{ i }}{% endfor %}`, nil, 0, time.Nanosecond)
	if !errors.Is(err, budget.ErrTimeLimit) || !errors.Is(err, budget.ErrLimit) || errors.Is(err, send.ErrUnbuildable) {
		t.Fatalf("error %v: want ErrTimeLimit and ErrLimit, not ErrUnbuildable", err)
	}
	if !strings.Contains(err.Error(), "rendering took longer than the time limit of 1ns") {
		t.Errorf("error = %v, want the time limit", err)
	}
}

// FuzzTemplate throws arbitrary template source at the parser and renderer:
// never a panic, and a template that parses renders within the limits or
// fails with ErrUnbuildable (or ErrOverloaded, past the heap ceiling of a
// process run with a memory limit). The time limit is out of reach: steps
// and sizes stop every template, so no outcome depends on the machine.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		`{"name": "{{ doc.name }}"}`, `{% if doc.x %}1{% else %}2{% endif %}`, `{{ doc.items | length }}`,
		`{% for a in doc.items %}{% for b in doc.items %}{{ a }}{{ b }}{% endfor %}{% endfor %}`,
		`{% raw %}{{ x }}{% endraw %}`, `{{ "a" ~ doc.name }}`, `{% set x = doc.name %}{{ x }}`, `{{`, `{%`, `{#`,
	} {
		f.Add(s)
	}
	for _, h := range hostileTemplates {
		f.Add(h.src)
	}
	for _, h := range captureTemplates {
		f.Add(h.src)
	}
	f.Add(`{{ 1 // 0 }}{{ 1 % 0 }}{{ 9223372036854775807 * 2 }}`)
	doc := map[string]any{"name": "SO-1", "x": true, "items": []any{int64(1), "two", nil}}
	f.Fuzz(func(t *testing.T, src string) {
		if fuzzing() {
			// While fuzzing, a rendering that outlives its limits crashes
			// the run, which saves the input. (The seed corpus, run by
			// go test, has go test's -timeout for that, and no clock.)
			watchdog := time.AfterFunc(30*MaxRenderTime, func() { panic(fmt.Sprintf("rendering %q did not stop at its limits", src)) })
			defer watchdog.Stop()
		}
		if err := Validate(src); err != nil {
			return
		}
		if _, err := untimedRender(src, doc, 0); err != nil && !errors.Is(err, send.ErrUnbuildable) && !errors.Is(err, budget.ErrOverloaded) {
			t.Fatalf("render error %v wraps neither ErrUnbuildable nor ErrOverloaded", err)
		}
	})
}
