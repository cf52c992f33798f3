package template

import (
	"reflect"
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
