package template

import (
	"testing"
	"time"
)

// BenchmarkRender measures one rendering of ordinary templates: the
// README's example, a loop over a document's items with filters, a
// capture, and a Frappe-compat template.
func BenchmarkRender(b *testing.B) {
	items := make([]any, 50)
	for i := range items {
		items[i] = map[string]any{"item_code": "ITEM-" + string(rune('A'+i%26)), "qty": float64(i + 1), "rate": 12.5}
	}
	doc := map[string]any{"name": "SO-0001", "customer": "Café Nord", "grand_total": 12500.0, "items": items}
	for _, tc := range []struct {
		name, src string
		frappe    bool
	}{
		{"Readme", `{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`, false},
		{"Loop", `{"items": [{% for i in doc.items %}{"code": "{{ i.item_code | lower | replace('-', '_') }}", "amount": {{ i.qty * i.rate | round(2) }}}{% if not loop.last %},{% endif %}{% endfor %}], "codes": "{{ doc.items | map(attribute='item_code') | join(',') }}"}`, false},
		{"Capture", `{% set lines %}{% for i in doc.items %}{{ i.item_code }} x {{ i.qty }};{% endfor %}{% endset %}{"lines": "{{ lines | trim }}", "n": {{ doc.items | length }}}`, false},
		{"Frappe", `{"name": "{{ doc.name }}", "customer": "{{ doc.customer }}", "total": "{{ doc.grand_total | flt }}", "items": {{ doc.items | json }}}`, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if tc.frappe {
					_, err = RenderFrappe(tc.src, doc, MaxRenderedBytes, time.Time{}, MaxRenderTime)
				} else {
					_, err = renderTemplate(tc.src, doc, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
