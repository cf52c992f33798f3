package condition

import (
	"strings"
	"testing"
)

// BenchmarkConditionMatch measures one evaluation of a condition as
// fan-out makes it, per webhook and event, in each language.
func BenchmarkConditionMatch(b *testing.B) {
	doc := map[string]any{
		"name": "SO-0001", "customer": "Café Nord", "is_return": int64(0), "docstatus": int64(1),
		"base_total": 12500.0, "grand_total": 12500.0, "status": "To Deliver and Bill", "posting_date": "2024-01-31",
		"items": []any{map[string]any{"item_code": "A", "qty": int64(2)}},
	}
	for _, tc := range []struct{ language, src string }{
		{LanguageExpr, `doc.docstatus == 1 && doc.grand_total > 10000 && doc.status != "Draft"`},
		{LanguagePython, `doc.docstatus == 1 and doc.grand_total > 10000 and doc.status != "Draft"`},
		// Built-ins are charged to the budget call by call.
		{"expr-builtins", `lower(doc.status) != "draft" && len(split(doc.name, "-")) == 2 && any(doc.items, .qty > 1)`},
	} {
		b.Run(tc.language, func(b *testing.B) {
			c, err := CompileIn(strings.TrimSuffix(tc.language, "-builtins"), tc.src)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := c.Match(doc); err != nil || !ok {
					b.Fatalf("%v %v", ok, err)
				}
			}
		})
	}
}

// BenchmarkPythonConditionBuiltins is a Python condition that calls the
// charged built-ins and methods.
func BenchmarkPythonConditionBuiltins(b *testing.B) {
	doc := map[string]any{"name": "SO-0001", "customer": "Café Nord", "total": "12500", "items": []any{"a", "b", "c"}}
	c, err := CompileIn(LanguagePython, `doc.name.lower().startswith('so-') and int(doc.total) > 100 and len(doc.items) == 3 and str(len(doc.name)) == '7' and doc.customer[:3].upper() == 'CAF'`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := c.Match(doc); err != nil || !ok {
			b.Fatalf("%v %v", ok, err)
		}
	}
}
