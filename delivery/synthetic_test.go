package delivery

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestTemplatePaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want [][]string
	}{
		{`{{ doc.name }}`, [][]string{{"name"}}},
		{`{{ doc.customer.address.city }}`, [][]string{{"customer", "address", "city"}}},
		{`{{ doc["grand total"] }} {{ doc['x'].y }}`, [][]string{{"grand total"}, {"x", "y"}}},
		{`{{ doc.get("rate") }} {{ doc.get('qty', 0) }}`, [][]string{{"rate"}, {"qty"}}},
		{`{{ doc.items.append(1) }}`, [][]string{{"items"}}},
		{`{{ mydoc.name }} {{ doc }}`, nil},
	} {
		if got := templatePaths(tc.src); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("templatePaths(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestSyntheticDocParentsWin(t *testing.T) {
	t.Parallel()
	doc := syntheticDoc([][]string{{"a"}, {"a", "b"}, {"c"}}, 1)
	want := map[string]any{"a": map[string]any{"b": 1}, "c": 1}
	if !reflect.DeepEqual(doc, want) {
		t.Fatalf("syntheticDoc = %v, want %v", doc, want)
	}
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
		{Spec{Template: `{"a": {{ doc.a }}}`, Compat: CompatFrappe}, false}, // a number makes it JSON
		{Spec{Template: `{"a": "{{ doc.a }}",}`, Compat: CompatFrappe}, true},
		{Spec{Template: `{"n": {{ doc.items | length }}}`}, false},                                    // JSON with a string or a list
		{Spec{Template: `{"a": 1,}`, Structure: StructureForm}, false},                                // a form ignores the template
		{Spec{Template: `{"a": 1,}`, Compat: CompatFrappe, Fields: []Field{{Fieldname: "a"}}}, false}, // fields win in frappe
	} {
		err := CheckTemplateJSON(untimed(tc.spec))
		switch {
		case tc.bad && (!errors.Is(err, ErrUnbuildable) || !strings.Contains(err.Error(), "line 1, column")):
			t.Errorf("%+v: %v, want a refusal naming the position", tc.spec, err)
		case !tc.bad && err != nil:
			t.Errorf("%+v: refused: %v", tc.spec, err)
		}
	}
}
