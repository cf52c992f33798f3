package template

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

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
		if err := ValidateFrappe(src); err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused with %q", src, err, want)
		}
	}
	if err := ValidateFrappe(`{"site": "https://frappe.io/x", "db": "frappe.db is text here", "n": "{{ doc.name }}"}`); err != nil {
		t.Errorf("frappe.X outside tags is text, not a helper: %v", err)
	}
	_, err := RenderFrappe(`{"x": "{% for i in range(100000000) %}{% endfor %}"}`, nil, MaxRenderedBytes, time.Time{}, outOfReach)
	if !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("long loop: %v, want a limit", err)
	}
	_, err = RenderFrappe(`{"x": "{% for i in range(900) %}{{ doc.s ~ doc.s }}{% endfor %}"}`, map[string]any{"s": strings.Repeat("a", 900)}, 1000, time.Time{}, outOfReach)
	if !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("values over the memory budget: %v, want a limit", err)
	}
}

// Frappe's date helpers read the time they are given, in templates and URL
// templates alike (and in Python conditions,
// TestPythonConditionDateHelpersReadTheGivenTime), so a dispatcher's clock
// decides what nowdate() says.
func TestFrappeDateHelpersReadTheGivenTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 1, 2, 23, 30, 0, 0, time.FixedZone("UTC+1", 3600))
	doc := map[string]any{"name": "SO-1", "delivery_date": "2031-01-05"}

	body, err := RenderFrappe(`{"today": "{{ frappe.utils.nowdate() }}", "now": "{{ utils.now() }}", "left": {{ frappe.utils.date_diff(doc.delivery_date, frappe.utils.nowdate()) }}, "due": "{{ frappe.utils.add_days(frappe.utils.getdate(), 1) }}"}`, doc, MaxRenderedBytes, at, outOfReach)
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
}

// The json and tojson filters write what Python writes (printed by python3
// 3.11: frappe.as_json's json.dumps(v, indent=1, sort_keys=True,
// separators=(",", ": ")), and Jinja's tojson with and without indent),
// for a dict a template builds as well as for the document's values.
func TestFrappeJSONFiltersWriteWhatPythonWrites(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"b": []any{int64(1), 2.0, map[string]any{}}, "a": map[string]any{"z": []any{}, "y": 1e-05}, "c": "é<"}
	for tpl, want := range map[string]string{
		`{{ doc | json }}`:                                    "{\n \"a\": {\n  \"y\": 1e-05,\n  \"z\": []\n },\n \"b\": [\n  1,\n  2.0,\n  {}\n ],\n \"c\": \"\\u00e9<\"\n}",
		`{{ doc | tojson }}`:                                  "{\"a\": {\"y\": 1e-05, \"z\": []}, \"b\": [1, 2.0, {}], \"c\": \"\\u00e9\\u003c\"}",
		`{{ doc | tojson(indent=2) }}`:                        "{\n  \"a\": {\n    \"y\": 1e-05,\n    \"z\": []\n  },\n  \"b\": [\n    1,\n    2.0,\n    {}\n  ],\n  \"c\": \"\\u00e9\\u003c\"\n}",
		`{{ {"b": doc.b, "a": doc.a, "c": doc.c} | tojson }}`: "{\"a\": {\"y\": 1e-05, \"z\": []}, \"b\": [1, 2.0, {}], \"c\": \"\\u00e9\\u003c\"}",
	} {
		got, err := RenderFrappe(tpl, doc, MaxRenderedBytes, time.Time{}, outOfReach)
		if err != nil || string(got) != want {
			t.Errorf("%s:\n got %q %v\nwant %q", tpl, got, err, want)
		}
	}
}
