package template

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// hostileTemplates are templates that would take a worker's memory or time
// without the limits. Each must stop with ErrLimit (or, for the ones the
// parser refuses, ErrUnbuildable) and a message naming the limit.
var hostileTemplates = []struct {
	name, src, want string
}{
	{"RepeatHuge", `{"a": "{{ 'x' * 100000000000 }}"}`, "size limit of 1048576 bytes"},
	{"RepeatOverflow", `{{ 'xx' * 9223372036854775807 }}`, "more bytes than fit in memory"},
	{"RepeatFromDocument", `{{ "#" * doc.width }}`, "size limit"},
	{"RepeatBillion", `"{{ 'x' * 1000000000 }}"`, "size limit"},
	{"Center", `"{{ 'x' | center(1000000000) }}"`, "size limit"},
	{"CenterMethod", `"{{ 'x'.center(1000000000) }}"`, "size limit"},
	{"Ljust", `"{{ 'x'.ljust(1000000000) }}"`, "size limit"},
	{"Zfill", `"{{ '1'.zfill(1000000000) }}"`, "size limit"},
	{"Expandtabs", `"{{ 'a\tb'.expandtabs(1000000000) }}"`, "size limit"},
	{"FormatMethodWidth", `"{{ '{:>1000000000}'.format(1) }}"`, "size limit"},
	{"FormatFilterWidth", `"{{ '%0999999999d' | format(1) }}"`, "size limit"},
	{"Lipsum", `"{{ lipsum(100000000) }}"`, "size limit"},
	{"Indent", `"{{ 'a\nb' | indent(1000000000) }}"`, "size limit"},
	{"Wordwrap", `"{{ ('ab ' * 10000) | wordwrap(1, true, 'x' * 1000) }}"`, "size limit"},
	{"Batch", `{{ [1] | batch(1000000000, 'x') | list | length }}`, "size limit"},
	{"Slice", `{{ [1] | slice(1000000000) | list | length }}`, "size limit"},
	{"ReplaceBomb", `"{{ ('x' * 1000) | replace('x', 'y' * 10000) }}"`, "size limit"},
	{"ReplaceEmptyOld", `"{{ ('x' * 100000) | replace('', 'y' * 100) }}"`, "size limit"},
	{"JoinBomb", `"{{ range(100000) | join('x' * 1000) }}"`, "limit"},
	{"JoinMethodBomb", `{% set s = 'x' * 1000 %}"{{ s.join(range(100000)) }}"`, "size limit"},
	{"TojsonIndent", `{{ doc | tojson(indent=1000000) }}`, "indent 1000000 is more than the limit of 16"},
	{"RangeHuge", `{{ range(1000000000) | list | length }}`, "limit of 500000 steps"},
	{"NestedLoops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, "rendering"},
	{"NestedLoopsOverDocument", `{% for a in doc.items %}{% for b in doc.items %}{% for c in doc.items %}{% for d in doc.items %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}`, "rendering"},
	{"DoubleStringPlus", `{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}`, "limit"},
	{"DoubleStringUnrolled", `{% set x = 'x' * 1000 %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{{ x | length }}`, "size limit"},
	{"DoubleList", `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}`, "limit"},
	{"SharedListTree", `{% set ns = namespace(a=[doc]) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns.a | tojson }}`, "limit"},
	{"SharedDictTree", `{% set ns = namespace(a={'d': doc}) %}{% for i in range(64) %}{% set ns.a = {'l': ns.a, 'r': ns.a} %}{% endfor %}{{ ns.a }}`, "limit"},
	{"AppendMany", `{% set l = [] %}{% for i in range(100000) %}{% do l.append('x' * 1000) %}{% endfor %}{{ l | length }}`, "limit"},
	{"NamespaceCycle", `{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}`, "cannot be stored inside itself"},
	{"NamespaceGrowth", `{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}`, "limit"},
	{"ManyBigValues", `{% for i in range(100000) %}{% set x = 'y' * 1000000 %}{% endfor %}1`, "limit"},
	{"DeepParentheses", "{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}", "nests deeper than the limit of 100 levels"},
	{"DeepLists", "{{ " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + " }}", "nests deeper than the limit of 100 levels"},
	{"DeepNot", "{{ " + strings.Repeat("not ", 10000) + "1 }}", "nests deeper than the limit of 100 levels"},
	{"DeepMinus", "{{ " + strings.Repeat("-", 10000) + "1 }}", "nests deeper than the limit of 100 levels"},
	{"DeepIf", strings.Repeat("{% if 1 %}", 2000) + strings.Repeat("{% endif %}", 2000), "nests deeper than the limit of 100 levels"},
	{"RecursiveMacro", `{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}`, "{% macro %} is not supported"},
	{"Include", `{% include "/etc/passwd" %}`, "{% include %} is not supported"},
	{"InBigStringLoop", `{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% if 'y' in s %}{% endif %}{% endfor %}`, "limit of 500000 steps"},
	{"CompareBigStringsLoop", `{% set s = 'x' * 500000 %}{% set u = 'x' * 500000 %}{% for i in range(100000) %}{% if s < u %}{% endif %}{% endfor %}`, "limit of 500000 steps"},
	{"InListLoop", `{% set l = ('x' * 20000) | list %}{% for i in range(50000) %}{% if 'y' in l %}{% endif %}{% endfor %}`, "limit"},
	{"ListCopyLoop", `{% set l = ('x' * 50000) | list %}{% for i in range(100000) %}{% set c = l.copy() %}{% endfor %}`, "limit"},
	{"TestInLoop", `{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% if 'y' is in s %}{% endif %}{% endfor %}`, "limit of 500000 steps"},
	{"StrideSliceLoop", `{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% set c = s[::-1] %}{% endfor %}`, "limit"},
	{"UnknownFilter", `{{ doc.name | system('id') }}`, "unknown filter 'system'"},
}

func TestHostileTemplatesStopAtALimit(t *testing.T) {
	t.Parallel()

	doc := map[string]any{"width": 1e12, "items": slices.Repeat([]any{1.0}, 100), "name": "SO-1"}
	for _, tt := range hostileTemplates {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The time limit out of reach: steps and bytes, which are final, must
			// stop each of these, whatever the machine's load.
			body, err := untimedRender(tt.src, maps.Clone(doc), 0)
			if err == nil {
				t.Fatalf("rendered %d bytes, want a limit", len(body))
			}
			if !errors.Is(err, send.ErrUnbuildable) {
				t.Errorf("error %v does not wrap ErrUnbuildable", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to name %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestLimitErrorsAreErrLimit(t *testing.T) {
	t.Parallel()

	_, err := untimedRender(`"{{ 'x' * 100000000000 }}"`, nil, 0)
	if !errors.Is(err, budget.ErrLimit) || !errors.Is(err, send.ErrUnbuildable) {
		t.Fatalf("error %v is not both ErrLimit and ErrUnbuildable", err)
	}
	_, err = untimedRender(`{{ doc.missing }}`, nil, 0)
	if errors.Is(err, budget.ErrLimit) {
		t.Errorf("a missing variable %v counts as a limit", err)
	}
}

// TestJSONEscaping holds the README's rule: every {{ }} in a JSON template
// is one JSON value, or escaped text inside a JSON string, so a document
// cannot add keys to the body it is signed in.
func TestJSONEscaping(t *testing.T) {
	t.Parallel()

	readme := `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`
	tests := []struct {
		name     string
		template string
		doc      map[string]any
		want     map[string]any
	}{
		{
			name:     "ReadmeExample",
			template: readme,
			doc:      map[string]any{"name": "SO-1", "grand_total": 1500.0},
			want:     map[string]any{"name": "SO-1", "total": 1500.0},
		},
		{
			name:     "StringCannotCloseItsString",
			template: readme,
			doc:      map[string]any{"name": `SO-1", "approved": true, "x": "`, "grand_total": 1500.0},
			want:     map[string]any{"name": `SO-1", "approved": true, "x": "`, "total": 1500.0},
		},
		{
			name:     "UnquotedStringStaysOneValue",
			template: readme,
			doc:      map[string]any{"name": "SO-1", "grand_total": `1, "refund": 999999`},
			want:     map[string]any{"name": "SO-1", "total": `1, "refund": 999999`},
		},
		{
			name:     "BackslashesAndControls",
			template: readme,
			doc:      map[string]any{"name": "a\\\"\n\u0000</script>", "grand_total": 1.5},
			want:     map[string]any{"name": "a\\\"\n\u0000</script>", "total": 1.5},
		},
		{
			name:     "ListCannotAddElements",
			template: `{"ids": [{{ doc.id }}]}`,
			doc:      map[string]any{"id": `1], "admin": [true`},
			want:     map[string]any{"ids": []any{`1], "admin": [true`}},
		},
		{
			name:     "KeyPosition",
			template: `{"{{ doc.key }}": 1}`,
			doc:      map[string]any{"key": `a": 2, "b`},
			want:     map[string]any{`a": 2, "b`: 1.0},
		},
		{
			name:     "ToJSONIsWrittenAsJSON",
			template: `{"items": {{ doc.items | tojson }}, "paid": {{ doc.paid }}, "none": {{ doc.none }}}`,
			doc:      map[string]any{"items": []any{map[string]any{"q": 1.0}}, "paid": true, "none": nil},
			want:     map[string]any{"items": []any{map[string]any{"q": 1.0}}, "paid": true, "none": nil},
		},
		{
			name:     "ToJSONInsideAStringIsEscaped",
			template: `{"items": "{{ doc.items | tojson }}"}`,
			doc:      map[string]any{"items": []any{"a"}},
			want:     map[string]any{"items": `["a"]`},
		},
		{
			name:     "DictsAndListsOutsideStrings",
			template: `{"customer": {{ doc.customer }}, "tags": {{ doc.tags }}}`,
			doc:      map[string]any{"customer": map[string]any{"name": `x"y`}, "tags": []any{"a", 2.0}},
			want:     map[string]any{"customer": map[string]any{"name": `x"y`}, "tags": []any{"a", 2.0}},
		},
		{
			name:     "LoopWithSeparatorsInData",
			template: `[{% for i in doc.items %}"{{ i }}"{% if not loop.last %},{% endif %}{% endfor %}]`,
			doc:      map[string]any{"items": []any{`a"`, "b"}},
			want:     nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := untimedRender(tt.template, tt.doc, 0)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if tt.want == nil {
				var got []any
				if err := json.Unmarshal(body, &got); err != nil || len(got) != 2 || got[0] != `a"` {
					t.Fatalf("body %s: %v, want two elements", body, err)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %s is not JSON: %v", body, err)
			}
			if !equalJSON(got, tt.want) {
				t.Errorf("body %s decodes to %v, want %v", body, got, tt.want)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestUnknownNamesAreErrUnknownName(t *testing.T) {
	t.Parallel()

	for src, unknown := range map[string]bool{
		`"{{ shout(doc.name) }}"`:               true,
		`"{{ nope }}"`:                          true,
		`{% if 1 is frobnicated %}1{% endif %}`: true,
		`"{{ doc.name }}"`:                      false,
		`"{{ doc.a.b }}"`:                       false,
	} {
		_, err := untimedRender(src, map[string]any{}, 0)
		if err == nil {
			t.Errorf("%s rendered with an empty document", src)
			continue
		}
		if got := errors.Is(err, ErrUnknownName); got != unknown {
			t.Errorf("%s: %v; ErrUnknownName %v, want %v", src, err, got, unknown)
		}
	}
}
