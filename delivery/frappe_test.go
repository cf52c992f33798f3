package delivery

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The expected texts were printed by python3's json.dumps (3.11) with the
// arguments Frappe's enqueue_webhook uses.
func TestPyDumpsWritesWhatPythonWrites(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{
		1500.0: "1500.0", 0.1: "0.1", 1e16: "1e+16", 1.5e-05: "1.5e-05", 123456789.123: "123456789.123",
		0.0001: "0.0001", 12345678901234567.0: "1.2345678901234568e+16", 2.5e-07: "2.5e-07",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("repr(%v) = %q, want %q", f, got, want)
		}
	}
	obj := pyObject{{"b", "Café ☃ 😀 \x7f \x01 \"q\" \\ \n\t/<>"}, {"a", []any{int64(1), 2.0, nil, true}}}
	got, err := pyDumps(obj)
	want := `{"b": "Caf\u00e9 \u2603 \ud83d\ude00 \u007f \u0001 \"q\" \\ \n\t/<>", "a": [1, 2.0, null, true]}`
	if err != nil || string(got) != want {
		t.Errorf("dumps:\n got %s %v\nwant %s", got, err, want)
	}
	loaded, err := pyLoads([]byte(`{"z": 1, "a": 1.50, "z": 2, "big": 123456789012345678901234567890, "e": 1E2, "o": {}, "l": []}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = pyDumps(loaded)
	if want := `{"z": 2, "a": 1.5, "big": 123456789012345678901234567890, "e": 100.0, "o": {}, "l": []}`; string(got) != want {
		t.Errorf("dumps(loads(...)):\n got %s\nwant %s", got, want)
	}
}

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
		tc.spec.Compat = CompatFrappe
		body, ct, err := Build(untimed(tc.spec), doc)
		if err != nil || ct != "" || string(body) != tc.want {
			t.Errorf("%s:\n got %s %q %v\nwant %s", tc.name, body, ct, err, tc.want)
		}
	}
}

// Helpers that need Frappe's database are refused at creation saying why;
// unknown helpers are refused too, instead of rendering None; Frappe
// templates keep the limits of every template.
func TestFrappeTemplatesRefusedAndBounded(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		`{"c": "{{ frappe.db.get_value('Customer', doc.customer, 'email') }}"}`: "reads Frappe's database",
		`{"d": {{ frappe.get_doc('Item', 'A') }}}`:                              "reads Frappe's database",
		`{"x": "{{ utils.get_url() }}"}`:                                        "not one of the frappe.utils helpers",
		`{"x": "{{ doc.name | nosuchfilter }}"}`:                                "nosuchfilter",
	} {
		if err := ValidateFrappeTemplate(src); err == nil || !errors.Is(err, ErrUnbuildable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused with %q", src, err, want)
		}
	}
	if err := ValidateFrappeTemplate(`{"site": "https://frappe.io/x", "db": "frappe.db is text here", "n": "{{ doc.name }}"}`); err != nil {
		t.Errorf("frappe.X outside tags is text, not a helper: %v", err)
	}
	_, _, err := Build(Spec{TimeLimit: outOfReach, Compat: CompatFrappe, Template: `{"x": "{% for i in range(100000000) %}{% endfor %}"}`}, nil)
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("long loop: %v, want a limit", err)
	}
	_, _, err = Build(Spec{TimeLimit: outOfReach, Compat: CompatFrappe, MaxBytes: 1000, Template: `{"x": "{% for i in range(900) %}{{ doc.s ~ doc.s }}{% endfor %}"}`}, map[string]any{"s": strings.Repeat("a", 900)})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("values over the memory budget: %v, want a limit", err)
	}
}

// Frappe's date helpers read the time they are given, in templates, URL
// templates and Python conditions alike, so a dispatcher's clock decides
// what nowdate() says.
func TestFrappeDateHelpersReadTheGivenTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 1, 2, 23, 30, 0, 0, time.FixedZone("UTC+1", 3600))
	doc := map[string]any{"name": "SO-1", "delivery_date": "2031-01-05"}

	body, _, err := Build(Spec{TimeLimit: outOfReach, Compat: CompatFrappe, Template: `{"today": "{{ frappe.utils.nowdate() }}", "now": "{{ utils.now() }}", "left": {{ frappe.utils.date_diff(doc.delivery_date, frappe.utils.nowdate()) }}, "due": "{{ frappe.utils.add_days(frappe.utils.getdate(), 1) }}"}`, Now: at}, doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"today": "2031-01-02", "now": "2031-01-02 22:30:00.000000", "left": 3, "due": "2031-01-03"}`; string(body) != want {
		t.Fatalf("template at %s rendered %s, want %s", at, body, want)
	}

	u, err := RenderURLWithin("http://127.0.0.1:1/{{ frappe.utils.nowdate() }}/{{ doc.name }}", doc, CompatFrappe, at, outOfReach)
	if err != nil || u != "http://127.0.0.1:1/2031-01-02/SO-1" {
		t.Fatalf("url at %s: %q, %v", at, u, err)
	}

	c, err := CompileConditionIn(LanguagePython, "nowdate() == '2031-01-02' and date_diff(doc.delivery_date, nowdate()) == 3")
	if err != nil {
		t.Fatal(err)
	}
	for when, want := range map[time.Time]bool{at: true, at.Add(24 * time.Hour): false} {
		if ok, err := c.MatchWithin(doc, when, outOfReach); err != nil || ok != want {
			t.Errorf("condition at %s: %v, %v; want %v", when, ok, err, want)
		}
	}
}
