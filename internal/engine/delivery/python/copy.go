package python

import (
	"encoding/json"
	"math"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// CopyDoc copies doc for a template (CopyValue: a value for a Python
// condition). The copy keeps gonja's dict methods
// (doc.update and friends) away from the caller's map. Decoded JSON may
// hold a number as float64 or json.Number: by default an integral one
// becomes an int, since gonja would print an item index 3 as "3.0"; with
// keepFloats (Frappe's templates) a float stays a float (1500.0 renders as
// Python's "1500.0") and only int64 and json.Number integers become ints.
func CopyDoc(doc map[string]any, keepFloats bool) (map[string]any, error) {
	out, err := copyValue(doc, 0, keepFloats)
	if err != nil {
		return nil, err
	}
	m, _ := out.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// CopyValue is CopyDoc for one value of a document.
func CopyValue(v any, keepFloats bool) (any, error) { return copyValue(v, 0, keepFloats) }

func copyValue(v any, depth int, keepFloats bool) (any, error) {
	if depth > budget.MaxDepth {
		return nil, send.Unbuildable("document nests deeper than %d levels", budget.MaxDepth)
	}
	number := func(f float64) any {
		if keepFloats {
			return f
		}
		return normalizeFloat(f)
	}
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return x, nil
		}
		out := make(map[string]any, len(x))
		for k, item := range x {
			n, err := copyValue(item, depth+1, keepFloats)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		if x == nil {
			return x, nil
		}
		out := make([]any, len(x))
		for i, item := range x {
			n, err := copyValue(item, depth+1, keepFloats)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case float64:
		return number(x), nil
	case float32:
		return number(float64(x)), nil
	case int64:
		if keepFloats {
			return int(x), nil
		}
		return v, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i), nil
		}
		if f, err := x.Float64(); err == nil {
			return number(f), nil
		}
		return x.String(), nil
	default:
		return v, nil
	}
}

// normalizeFloat turns f into an int when that loses nothing.
func normalizeFloat(f float64) any {
	const exact = 1 << 53
	if f == math.Trunc(f) && f >= -exact && f <= exact {
		return int(f)
	}
	return f
}
