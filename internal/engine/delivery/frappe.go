package delivery

import (
	"cmp"
	"strings"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
)

// buildFrappe builds a compat frappe body as enqueue_webhook does
// (frappe/integrations/doctype/webhook/webhook.py, get_webhook_data): the
// data rows as {key: doc.get(fieldname)} in row order, else the template
// rendered, parsed (json.loads) and written again, else {}; always as
// json.dumps(data, default=str). The structure changes nothing in the bytes
// (Frappe's "Form URL-Encoded" sends the same JSON text): the Content-Type
// is whatever the webhook's header rows say, none otherwise, as requests
// sends a str body without one.
func buildFrappe(spec Spec, doc map[string]any) ([]byte, error) {
	var data any = python.Object{}
	switch {
	case len(spec.Fields) > 0:
		obj := python.Object{}
		index := map[string]int{}
		for _, f := range spec.Fields {
			name, key, err := f.resolve()
			if err != nil {
				return nil, err
			}
			if i, ok := index[key]; ok {
				obj[i].Value = doc[name]
				continue
			}
			index[key] = len(obj)
			obj = append(obj, python.Pair{Key: key, Value: doc[name]})
		}
		data = obj
	case strings.TrimSpace(spec.Template) != "":
		maxBytes := spec.MaxBytes
		if maxBytes <= 0 {
			maxBytes = template.MaxRenderedBytes
		}
		text, err := template.RenderFrappe(spec.Template, doc, maxBytes, spec.Now, cmp.Or(spec.TimeLimit, template.MaxRenderTime))
		if err != nil {
			return nil, err
		}
		if err := template.CheckJSON(text); err != nil {
			return nil, err
		}
		if data, err = python.Loads(text); err != nil {
			return nil, err
		}
	}
	body, err := python.Dumps(data)
	if err != nil {
		return nil, err
	}
	if spec.MaxBytes > 0 && len(body) > spec.MaxBytes {
		return nil, send.Unbuildable("%w", budget.OverLimit("body is larger than the size limit of %d bytes (delivery.max_payload_bytes)", spec.MaxBytes))
	}
	return body, nil
}
