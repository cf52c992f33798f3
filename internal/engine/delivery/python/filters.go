package python

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// Frappe reads a document with json.loads, where 3 is an int and 1500.0 a
// float, and every filter keeps that: frappe.as_json and tojson write
// 1500.0, sum adds ints to an int and anything with a float to a float.
// The filters below keep each value's identity as the template holds it
// (a document's floats are float64 and its ints int, see CopyDoc) and write
// JSON with pyEncoder, as Python's json.dumps does.

// pyFilterDumps is the text a JSON-writing filter makes of in, or its error
// named after the filter. htmlSafe escapes <, >, & and ' as Jinja's
// htmlsafe_json_dumps does.
func pyFilterDumps(name string, in *exec.Value, enc pyEncoder, htmlSafe bool) *exec.Value {
	v, err := pyValue(in, 0)
	if err == nil {
		var b []byte
		if b, err = enc.dumps(v); err == nil {
			s := string(b)
			if htmlSafe {
				s = htmlSafeJSON.Replace(s)
			}
			return exec.AsValue(s)
		}
	}
	return exec.AsValue(fmt.Errorf("%s: %w", name, err))
}

var htmlSafeJSON = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`, "'", `\u0027`)

// frappeToJSON is Jinja's tojson(indent=None): json.dumps(value,
// sort_keys=True, indent=indent), HTML-safe.
func frappeToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	enc := pyEncoder{itemSep: ", ", sortKeys: true}
	var indent *exec.Value
	if len(params.Args) > 0 {
		indent = params.Args[0]
	}
	if kw, ok := params.KwArgs["indent"]; ok {
		indent = kw
	}
	if len(params.Args) > 1 || len(params.KwArgs) > 1 || (len(params.KwArgs) == 1 && indent == nil) {
		return exec.AsValue(fmt.Errorf("tojson takes only indent"))
	}
	if indent != nil && !indent.IsNil() {
		if !indent.IsInteger() {
			return exec.AsValue(fmt.Errorf("tojson: indent must be an integer, not %s", indent.String()))
		}
		n := indent.Integer()
		enc.indent, enc.itemSep = &n, ","
	}
	return pyFilterDumps("tojson", in, enc, true)
}

// frappeSum is Jinja's sum(iterable, attribute=None, start=0): Python's
// sum, an int while the start and every term are ints (or booleans), else
// a float. Terms that are no number are skipped, as gonja's sum does.
func frappeSum(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	var attribute, start *exec.Value
	for i, a := range params.Args {
		switch i {
		case 0:
			attribute = a
		case 1:
			start = a
		default:
			return exec.AsValue(fmt.Errorf("sum takes attribute and start"))
		}
	}
	for k, v := range params.KwArgs {
		switch k {
		case "attribute":
			attribute = v
		case "start":
			start = v
		default:
			return exec.AsValue(fmt.Errorf("sum takes attribute and start, not %s", k))
		}
	}
	var (
		total   int64
		ftotal  float64
		isFloat bool
	)
	add := func(v *exec.Value) {
		switch {
		case v == nil:
		case v.IsFloat():
			if !isFloat {
				ftotal, isFloat = float64(total), true
			}
			ftotal += v.Float()
		case v.IsInteger() || v.IsBool():
			n := int64(v.Integer())
			if v.IsBool() {
				n = 0
				if v.Bool() {
					n = 1
				}
			}
			if isFloat {
				ftotal += float64(n)
			} else {
				total += n
			}
		}
	}
	if start != nil && !start.IsNil() {
		add(start)
	}
	in.Iterate(func(_, _ int, key, _ *exec.Value) bool {
		item := key
		if attribute != nil && !attribute.IsNil() {
			var found bool
			if item, found = attributeOf(item, attribute); !found {
				return true
			}
		}
		add(item)
		return true
	}, func() {})
	if isFloat {
		return exec.AsValue(ftotal)
	}
	return exec.AsValue(total)
}

// attributeOf is Jinja's make_attrgetter: a dotted path of keys or
// indexes.
func attributeOf(v *exec.Value, attribute *exec.Value) (*exec.Value, bool) {
	if attribute.IsInteger() {
		return v.GetItem(attribute.Integer())
	}
	for _, part := range strings.Split(attribute.String(), ".") {
		var key any = part
		if i, err := strconv.Atoi(part); err == nil {
			key = i
		}
		next, found := v.GetItem(key)
		if !found {
			next, found = v.GetAttribute(part)
		}
		if !found {
			return nil, false
		}
		v = next
	}
	return v, true
}

// pyValue turns a template value into what pyEncoder writes: each number
// stays the int or float it is, a gonja dict keeps its order, and what JSON
// has no type for is its text (default=str).
func pyValue(v any, depth int) (any, error) {
	if depth > budget.MaxDepth {
		return nil, send.Unbuildable("value nests deeper than %d levels", budget.MaxDepth)
	}
	switch x := v.(type) {
	case *exec.Value:
		if x == nil {
			return nil, nil
		}
		return pyValue(x.Interface(), depth)
	case nil, bool, string, int, int64, float64, float32, json.Number, Int, Float:
		return x, nil
	case exec.Dict:
		return pyValue(&x, depth)
	case *exec.Dict:
		obj := make(Object, 0, len(x.Pairs))
		for _, p := range x.Pairs {
			item, err := pyValue(p.Value, depth+1)
			if err != nil {
				return nil, err
			}
			obj = append(obj, Pair{p.Key.String(), item})
		}
		return obj, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			n, err := pyValue(item, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Int(fmt.Sprint(r.Uint())), nil
	case reflect.Float32, reflect.Float64:
		return r.Float(), nil
	case reflect.Slice, reflect.Array:
		out := make([]any, r.Len())
		for i := range out {
			n, err := pyValue(r.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		if r.Type().Key().Kind() == reflect.String {
			out := make(map[string]any, r.Len())
			for it := r.MapRange(); it.Next(); {
				n, err := pyValue(it.Value().Interface(), depth+1)
				if err != nil {
					return nil, err
				}
				out[it.Key().String()] = n
			}
			return out, nil
		}
	}
	// default=str: anything else is its text, which for what a template
	// marked with `| tojson` is that JSON text.
	return fmt.Sprint(v), nil
}
