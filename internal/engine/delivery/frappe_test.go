package delivery

import (
	"testing"

	"github.com/homingdev/homing/internal/engine/delivery/template"
)

// A compat frappe body: data rows in row order, a template rendered as
// Frappe's Jinja renders it and written again, {} when nothing is
// configured; no Content-Type of its own, form or JSON.
func TestBuildFrappe(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"name": "SO-0001", "customer": "Café Nord", "grand_total": 1500.0, "qty": int64(3), "is_return": int64(0),
		"items": []any{map[string]any{"item_code": "A", "rate": 10.5}}}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"nothing", Spec{}, `{}`},
		{"form, nothing", Spec{Structure: StructureForm}, `{}`},
		{"rows", Spec{Fields: []Field{{Fieldname: "name", Key: "id"}, {Fieldname: "grand_total", Key: "total"}, {Fieldname: "missing", Key: "m"}, {Fieldname: "customer", Key: "c"}}},
			`{"id": "SO-0001", "total": 1500.0, "m": null, "c": "Caf\u00e9 Nord"}`},
		{"form rows", Spec{Structure: StructureForm, Fields: []Field{{Fieldname: "qty", Key: "qty"}}}, `{"qty": 3}`},
		{"template", Spec{Template: `{"total": {{ doc.grand_total }}, "n": "{{ doc.name }}", "x": "{{ doc.nothing }}", "u": "{{ unknown_name }}", "items": {{ doc.items | json }}, "len": {{ doc.items | len }}, "f": {{ "12.5" | flt }}, "c": {{ "7" | cint }}, "s": "{{ doc.qty | str }}"}`},
			`{"total": 1500.0, "n": "SO-0001", "x": "None", "u": "{{ unknown_name }}", "items": [{"item_code": "A", "rate": 10.5}], "len": 1, "f": 12.5, "c": 7, "s": "3"}`},
		{"helpers", Spec{Template: `{"d": "{{ frappe.utils.add_days('2024-01-30', 3) }}", "diff": {{ utils.date_diff('2024-03-01', '2024-02-01') }}, "m": "{{ frappe.utils.fmt_money(1234567.5) }}", "fd": "{{ utils.format_date('2024-01-31') }}"}`},
			`{"d": "2024-02-02", "diff": 29, "m": "1,234,567.50", "fd": "31-01-2024"}`},
	} {
		tc.spec.Compat = template.CompatFrappe
		body, ct, err := Build(untimed(tc.spec), doc)
		if err != nil || ct != "" || string(body) != tc.want {
			t.Errorf("%s:\n got %s %q %v\nwant %s", tc.name, body, ct, err, tc.want)
		}
	}
}
