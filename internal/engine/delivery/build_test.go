package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/intake/event"
)

// salesOrder is a document as Frappe publishes it and the worker decodes
// it: its Currency and Float fields are floats (1500.0), so float64.
func salesOrder() map[string]any {
	return map[string]any{
		"name":        "SO-0001",
		"customer":    `ACME "Rockets" & Co <b>`,
		"grand_total": 1500.0,
		"discount":    12.345,
		"paid":        true,
		"notes":       nil,
		"items": []any{
			map[string]any{"item_code": "ROCKET", "qty": 2.0, "rate": 750.0},
		},
	}
}

func TestBuildJSON(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		spec Spec
		doc  map[string]any
		want string
	}{
		{
			name: "FrappeTemplate",
			spec: Spec{Template: `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`},
			doc:  salesOrder(),
			want: `{"name": "SO-0001", "total": 1500}`,
		},
		{
			name: "NestedAccessAndFilters",
			spec: Spec{Template: `{"code": "{{ doc.items[0].item_code }}", "qty": {{ doc.items[0].qty }}, "discount": {{ doc.discount | round(2) }}, "customer": {{ doc.customer | tojson }}}`},
			doc:  salesOrder(),
			want: `{"code": "ROCKET", "qty": 2, "discount": 12.35, "customer": "ACME \"Rockets\" \u0026 Co \u003cb\u003e"}`,
		},
		{
			name: "LoopOverItems",
			spec: Spec{Structure: StructureJSON, Template: `[{% for it in doc.items %}{"code": "{{ it.item_code }}", "amount": {{ it.qty * it.rate }}}{% if not loop.last %},{% endif %}{% endfor %}]`},
			doc:  salesOrder(),
			want: `[{"code": "ROCKET", "amount": 1500}]`,
		},
		{
			name: "DefaultFilterCoversMissingField",
			spec: Spec{Template: `{"po": {{ doc.po_no | default("none") | tojson }}}`},
			doc:  salesOrder(),
			want: `{"po": "none"}`,
		},
		{
			name: "BlankTemplateMeansWholeDocument",
			spec: Spec{Template: "  \n", Fields: nil},
			doc:  map[string]any{"b": 1.0, "a": "x"},
			want: `{"a":"x","b":1}`,
		},
		{
			name: "TemplateWinsOverFields",
			spec: Spec{Template: `{"n": "{{ doc.name }}"}`, Fields: []Field{{Fieldname: "grand_total"}}},
			doc:  salesOrder(),
			want: `{"n": "SO-0001"}`,
		},
		{
			name: "FieldsInListOrderMissingIsNull",
			spec: Spec{Fields: []Field{{Fieldname: "name", Key: "id"}, {Fieldname: "grand_total", Key: "amount"}, {Fieldname: "po_no"}, {Fieldname: "customer", Key: "buyer"}, {Fieldname: "items"}}},
			doc:  salesOrder(),
			want: `{"id":"SO-0001","amount":1500.0,"po_no":null,"buyer":"ACME \"Rockets\" & Co <b>","items":[{"item_code":"ROCKET","qty":2.0,"rate":750.0}]}`,
		},
		{
			name: "WholeDocument",
			spec: Spec{},
			doc:  map[string]any{"name": "SO-0001", "total": 1500.5, "tags": []any{"a", "<b>"}},
			want: `{"name":"SO-0001","tags":["a","<b>"],"total":1500.5}`,
		},
		{
			name: "NilDocument",
			spec: Spec{},
			doc:  nil,
			want: `{}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, contentType, err := Build(untimed(tt.spec), tt.doc)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if contentType != "application/json" {
				t.Errorf("content type = %q, want application/json", contentType)
			}
			if string(body) != tt.want {
				t.Errorf("body =\n%s\nwant\n%s", body, tt.want)
			}
			if !json.Valid(body) {
				t.Errorf("body is not valid JSON: %s", body)
			}
		})
	}
}

// A data row (a --field, JSON or form) sends each number as the event's
// JSON has it, which the worker's decoder keeps (event.DecodeDoc: 1500.0 is
// a float64, 1500 an int64): compat frappe as Frappe's json.dumps writes it,
// Homing's own as the producer wrote it, so a float keeps its point (1500.0,
// 1e20 as 100000000000000000000.0), at any depth. Templates keep their
// rules: Homing's hand a whole number to the template as an int (doc.go),
// Frappe's keep Python's float.
func TestDataRowsSendNumbersAsWritten(t *testing.T) {
	t.Parallel()
	const frappe = template.CompatFrappe
	rows := []Field{{Fieldname: "amount"}}
	jsonRows := Spec{Fields: rows}
	formRows := Spec{Structure: StructureForm, Fields: rows}
	tmpl := Spec{Template: `{"amount": {{ doc.amount }}}`}
	for _, tc := range []struct {
		compat  string
		body    string
		spec    Spec
		literal string
		want    string
	}{
		{"", "json rows", jsonRows, "1500.0", `{"amount":1500.0}`},
		{"", "json rows", jsonRows, "1500", `{"amount":1500}`},
		{"", "json rows", jsonRows, "0.5", `{"amount":0.5}`},
		{"", "json rows", jsonRows, "1e20", `{"amount":100000000000000000000.0}`},
		{"", "json rows", jsonRows, "1e21", `{"amount":1e+21}`},
		{"", "json rows", jsonRows, "-0.0", `{"amount":-0.0}`},
		{"", "json rows", jsonRows, `[{"qty": 2.0, "n": 2}]`, `{"amount":[{"n":2,"qty":2.0}]}`},
		{"", "form rows", formRows, "1500.0", `amount=1500.0`},
		{"", "form rows", formRows, "1500", `amount=1500`},
		{"", "form rows", formRows, "0.5", `amount=0.5`},
		{"", "form rows", formRows, "1e20", `amount=100000000000000000000.0`},
		{"", "form rows", formRows, "-0.0", `amount=-0.0`},
		{"", "form rows", formRows, `[{"qty": 2.0, "n": 2}]`, `amount=` + url.QueryEscape(`[{"n":2,"qty":2.0}]`)},
		{"", "template", tmpl, "1500.0", `{"amount": 1500}`},
		{"", "template", tmpl, "1500", `{"amount": 1500}`},
		{"", "template", tmpl, "0.5", `{"amount": 0.5}`},
		{frappe, "json rows", jsonRows, "1500.0", `{"amount": 1500.0}`},
		{frappe, "json rows", jsonRows, "1500", `{"amount": 1500}`},
		{frappe, "json rows", jsonRows, "0.5", `{"amount": 0.5}`},
		{frappe, "json rows", jsonRows, "1e20", `{"amount": 1e+20}`},
		{frappe, "json rows", jsonRows, "-0.0", `{"amount": -0.0}`},
		{frappe, "json rows", jsonRows, `[{"qty": 2.0, "n": 2}]`, `{"amount": [{"n": 2, "qty": 2.0}]}`},
		{frappe, "form rows", formRows, "1500.0", `{"amount": 1500.0}`},
		{frappe, "form rows", formRows, "1500", `{"amount": 1500}`},
		{frappe, "form rows", formRows, "1e20", `{"amount": 1e+20}`},
		{frappe, "template", tmpl, "1500.0", `{"amount": 1500.0}`},
		{frappe, "template", tmpl, "1500", `{"amount": 1500}`},
	} {
		doc, err := event.DecodeDoc([]byte(`{"amount": ` + tc.literal + `}`))
		if err != nil {
			t.Fatal(err)
		}
		spec := tc.spec
		spec.Compat = tc.compat
		body, _, err := Build(untimed(spec), doc)
		if err != nil || string(body) != tc.want {
			t.Errorf("compat %q, %s, amount %s: %s, %v; want %s", tc.compat, tc.body, tc.literal, body, err, tc.want)
		}
	}
}

func TestBuildForm(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		fields []Field
		doc    map[string]any
		want   string
	}{
		{
			name:   "FieldsInListOrder",
			fields: []Field{{Fieldname: "name", Key: "id"}, {Fieldname: "grand_total", Key: "amount"}, {Fieldname: "paid"}, {Fieldname: "notes"}, {Fieldname: "po_no"}},
			doc:    salesOrder(),
			want:   "id=SO-0001&amount=1500.0&paid=true&notes=&po_no=",
		},
		{
			name:   "Escaping",
			fields: []Field{{Fieldname: "customer", Key: "buyer name"}, {Fieldname: "q", Key: "a&b=c"}},
			doc:    map[string]any{"customer": `ACME "Rockets" & Co`, "q": "50%+1\nline"},
			want:   "buyer+name=ACME+%22Rockets%22+%26+Co&a%26b%3Dc=50%25%2B1%0Aline",
		},
		{
			name:   "NumbersWithoutExponentAndNestedAsJSON",
			fields: []Field{{Fieldname: "big"}, {Fieldname: "frac"}, {Fieldname: "int"}, {Fieldname: "items"}},
			doc:    map[string]any{"big": 1e21, "frac": 0.25, "int": 7, "items": []any{map[string]any{"q": 1.0}}},
			want:   "big=1000000000000000000000.0&frac=0.25&int=7&items=%5B%7B%22q%22%3A1.0%7D%5D",
		},
		{
			name: "NoFieldsMeansAllSorted",
			doc:  map[string]any{"b": "2", "a": "1", "c": 3.0},
			want: "a=1&b=2&c=3.0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, contentType, err := Build(Spec{TimeLimit: outOfReach, Structure: StructureForm, Fields: tt.fields, Template: `ignored {{`}, tt.doc)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if contentType != "application/x-www-form-urlencoded" {
				t.Errorf("content type = %q", contentType)
			}
			if string(body) != tt.want {
				t.Errorf("body = %q, want %q", body, tt.want)
			}
		})
	}
}

// panicky is a document value whose JSON encoding panics, standing in for
// any bug below Build.
type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("boom") }

func TestBuildErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		spec    Spec
		doc     map[string]any
		wantMsg string
	}{
		{
			name:    "MissingVariable",
			spec:    Spec{Template: `{"name": "{{ doc.nme }}"}`},
			doc:     salesOrder(),
			wantMsg: `template: line 1: unknown variable "doc.nme"`,
		},
		{
			name:    "MissingNestedItem",
			spec:    Spec{Template: "{\n\"qty\": {{ doc.items[3].qty }}}"},
			doc:     salesOrder(),
			wantMsg: `template: line 2: unknown variable "doc.items[3]"`,
		},
		{
			name:    "MissingVariableInCondition",
			spec:    Spec{Template: `{% if doc.status == "Paid" %}{}{% endif %}`},
			doc:     salesOrder(),
			wantMsg: `template: line 1: unknown variable "doc.status"`,
		},
		{
			name:    "UnknownFilter",
			spec:    Spec{Template: `"{{ doc.name | shout }}"`},
			doc:     salesOrder(),
			wantMsg: `template: line 1 col 16: unknown filter 'shout'`,
		},
		{
			name:    "RenderedInvalidJSON",
			spec:    Spec{Template: `{"paid": {{ doc.paid }},}`},
			doc:     salesOrder(),
			wantMsg: `rendered body is not valid JSON: invalid character '}' looking for beginning of object key string at offset 14`,
		},
		{
			name:    "SyntaxError",
			spec:    Spec{Template: `{"name": "{{ doc.name }"}`},
			doc:     salesOrder(),
			wantMsg: `template: line 1 col 24: '}}' expected here`,
		},
		{
			name:    "UnknownStructure",
			spec:    Spec{Structure: "xml"},
			doc:     salesOrder(),
			wantMsg: `structure "xml" is neither "json" nor "form"`,
		},
		{
			name:    "OversizeTemplate",
			spec:    Spec{Template: `"` + strings.Repeat("x", budget.MaxSourceBytes) + `"`},
			doc:     salesOrder(),
			wantMsg: fmt.Sprintf("template: %d bytes is more than the limit of 65536", budget.MaxSourceBytes+2),
		},
		{
			name:    "HugeRanges",
			spec:    Spec{Template: `{{ range(130000) | length }}{{ range(130000) | length }}{{ range(130000) | length }}{{ range(130000) | length }}`},
			doc:     salesOrder(),
			wantMsg: "template: line 1: rendering needs more than the limit of 500000 steps",
		},
		{
			name:    "HugeOutput",
			spec:    Spec{Template: `"{{ "x" * 2000000 }}"`},
			doc:     salesOrder(),
			wantMsg: "template: line 1: a value of 2000000 bytes would be larger than the size limit of 1048576 bytes (delivery.max_payload_bytes)",
		},
		{
			name:    "HugeOutputFromALoop",
			spec:    Spec{Template: `[{% for i in range(2000) %}"{{ doc.name }}{{ 'x' * 1000 }}",{% endfor %}0]`},
			doc:     salesOrder(),
			wantMsg: "template: line 1: rendered body is larger than the size limit of 1048576 bytes (delivery.max_payload_bytes)",
		},
		{
			name:    "OutputCapFromSpec",
			spec:    Spec{Template: `"{{ "x" * 2000 }}"`, MaxBytes: 1024},
			doc:     salesOrder(),
			wantMsg: "template: line 1: a value of 2000 bytes would be larger than the size limit of 1024 bytes (delivery.max_payload_bytes)",
		},
		{
			// gonja panicked here (Go's integer division by zero); it is
			// Python's ZeroDivisionError now.
			name:    "ModuloByZero",
			spec:    Spec{Template: `{{ 1 % 0 }}`},
			doc:     salesOrder(),
			wantMsg: "template: line 1: modulo by zero",
		},
		{
			name:    "PanicBelowBuild",
			spec:    Spec{},
			doc:     map[string]any{"x": panicky{}},
			wantMsg: "build body: boom",
		},
		{
			name:    "UnencodableField",
			spec:    Spec{Fields: []Field{{Fieldname: "ch"}}},
			doc:     map[string]any{"ch": make(chan int)},
			wantMsg: `field "ch": value cannot be encoded as JSON: json: unsupported type: chan int`,
		},
		{
			name:    "DuplicateKey",
			spec:    Spec{Fields: []Field{{Fieldname: "name", Key: "id"}, {Fieldname: "customer", Key: "id"}}},
			doc:     salesOrder(),
			wantMsg: `fields: key "id" is used twice`,
		},
		{
			name:    "EmptyFieldname",
			spec:    Spec{Structure: StructureForm, Fields: []Field{{Key: "id"}}},
			doc:     salesOrder(),
			wantMsg: `field "=id": fieldname is empty`,
		},
		{
			name:    "IncludeRefused",
			spec:    Spec{Template: `{% include "/etc/passwd" %}`},
			doc:     salesOrder(),
			wantMsg: `template: line 1: {% include %} is not supported in webhook templates`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, contentType, err := Build(untimed(tt.spec), tt.doc)
			if err == nil {
				t.Fatalf("Build succeeded with %q, want an error", body)
			}
			if !errors.Is(err, send.ErrUnbuildable) {
				t.Errorf("error %v does not wrap ErrUnbuildable", err)
			}
			if !strings.HasPrefix(err.Error(), tt.wantMsg) {
				t.Errorf("error =\n%s\nwant it to start with\n%s", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			if body != nil || contentType != "" {
				t.Errorf("failed Build returned body %q and content type %q", body, contentType)
			}
		})
	}
}

func TestBuildDoesNotChangeDocument(t *testing.T) {
	t.Parallel()

	doc := salesOrder()
	if _, _, err := Build(Spec{TimeLimit: outOfReach, Template: `{% do doc.update({"name": "changed"}) %}"{{ doc.name }}"`}, doc); err != nil {
		t.Fatalf("Build: %v", err)
	}
	if doc["name"] != "SO-0001" || doc["grand_total"] != 1500.0 {
		t.Errorf("document changed to %v", doc)
	}
}

func TestBuildConcurrent(t *testing.T) {
	t.Parallel()

	doc := salesOrder()
	spec := Spec{Template: `{"name": "{{ doc.name }}", "items": [{% for it in doc.items %}{{ it.qty }}{% endfor %}]}`}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			body, _, err := Build(untimed(spec), doc)
			if err == nil && string(body) != `{"name": "SO-0001", "items": [2]}` {
				err = fmt.Errorf("body %q", body)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// FuzzBuild checks that Build never panics and that whatever it returns as
// a JSON body is JSON.
func FuzzBuild(f *testing.F) {
	f.Add(`{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`, `{"name": "SO-1", "grand_total": 10.5}`, uint8(0))
	f.Add(`[{% for it in doc.items %}{{ it.qty }}{% if not loop.last %},{% endif %}{% endfor %}]`, `{"items": [{"qty": 1}, {"qty": 2}]}`, uint8(0))
	f.Add(`{{ doc.a | tojson }}`, `{"a": {"b": [1, "x", null]}}`, uint8(0))
	f.Add(`{{ doc.missing }}`, `{}`, uint8(0))
	f.Add(`{% for i in range(3) %}{{ 1 % i }}{% endfor %}`, `{}`, uint8(0))
	f.Add(`{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}`, `{}`, uint8(0))
	f.Add(``, `{"name": "SO-1", "n": 1e300}`, uint8(1))
	f.Add(``, `{"name": "SO-1", "tags": ["a&b"]}`, uint8(2))
	f.Add(`x`, `not json`, uint8(3))

	f.Fuzz(func(t *testing.T, template, docJSON string, mode uint8) {
		if strings.Contains(template, "*") {
			// gonja repeats strings (`"x" * 10000000000`) in one
			// allocation that no budget can see; see the package notes.
			t.Skip()
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(docJSON), &doc); err != nil {
			doc = map[string]any{"raw": docJSON}
		}
		spec := Spec{Template: template}
		switch mode % 4 {
		case 1:
			spec = Spec{Fields: []Field{{Fieldname: "name", Key: "id"}, {Fieldname: "n"}, {Fieldname: "raw"}}}
		case 2:
			spec = Spec{Structure: StructureForm}
		case 3:
			spec.Structure = template
		}
		body, contentType, err := Build(untimed(spec), doc)
		if err != nil {
			if !errors.Is(err, send.ErrUnbuildable) {
				t.Fatalf("error %v does not wrap ErrUnbuildable", err)
			}
			return
		}
		if contentType == "application/json" && !json.Valid(body) {
			t.Fatalf("JSON body is not valid JSON: %q", body)
		}
	})
}

func TestCheckTemplateJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec Spec
		bad  bool
	}{
		{Spec{Template: `{"a": {{ doc.a }},}`}, true},
		{Spec{Template: `{"a": {{ doc.a }}`}, true},
		{Spec{Template: `{"a": {{ doc.a }}}`}, false},
		{Spec{Template: `{"a": {{ doc.a }}}`, Compat: template.CompatFrappe}, false}, // a number makes it JSON
		{Spec{Template: `{"a": "{{ doc.a }}",}`, Compat: template.CompatFrappe}, true},
		{Spec{Template: `{"n": {{ doc.items | length }}}`}, false},                                             // JSON with a string or a list
		{Spec{Template: `{"a": 1,}`, Structure: StructureForm}, false},                                         // a form ignores the template
		{Spec{Template: `{"a": 1,}`, Compat: template.CompatFrappe, Fields: []Field{{Fieldname: "a"}}}, false}, // fields win in frappe
	} {
		err := CheckTemplateJSON(untimed(tc.spec))
		switch {
		case tc.bad && (!errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), "line 1, column")):
			t.Errorf("%+v: %v, want a refusal naming the position", tc.spec, err)
		case !tc.bad && err != nil:
			t.Errorf("%+v: refused: %v", tc.spec, err)
		}
	}
}
