package delivery

import (
	"strings"
	"testing"
)

// BenchmarkBuildTemplate renders a body template as fan-out does, once
// small and once with a loop long enough to read the heap several times.
func BenchmarkBuildTemplate(b *testing.B) {
	items := make([]any, 2000)
	for i := range items {
		items[i] = map[string]any{"item_code": "ITEM-" + strings.Repeat("x", i%7), "qty": int64(i)}
	}
	doc := map[string]any{"name": "SO-0001", "customer": "Café Nord", "grand_total": 12500.0, "items": items}
	for _, tc := range []struct{ name, template string }{
		{"small", `{"name": "{{ doc.name }}", "customer": {{ doc.customer | tojson }}, "total": {{ doc.grand_total }}}`},
		{"loop", `{"items": [{% for i in doc.items %}{"code": "{{ i.item_code }}", "qty": {{ i.qty }}}{% if not loop.last %},{% endif %}{% endfor %}]}`},
	} {
		spec := Spec{Structure: StructureJSON, Template: tc.template, MaxBytes: 1 << 20}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Build(spec, doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := Build(spec, doc); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
