package python

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// Frappe sends a webhook's body as Python's json.dumps(data, default=str)
// (frappe/integrations/doctype/webhook/webhook.py, enqueue_webhook:
// requests.request(..., data=json.dumps(data, default=str), ...)), not
// frappe.as_json: no indent, keys in insertion order, the separators
// ", " and ": ", ensure_ascii (every non-ASCII character and DEL as \uXXXX,
// with surrogate pairs), floats as Python's repr ("1500.0", "1e+16"), and
// NaN/Infinity as those words. The writers below produce those bytes.

// Pair is one key of a JSON object in the order Python's dict keeps.
type Pair struct {
	Key   string
	Value any
}

// Object is a JSON object with its key order, as json.loads builds it.
type Object []Pair

// Float is a JSON number that json.loads turns into a float.
type Float float64

// Int is a JSON number that json.loads turns into an int, as its digits.
type Int string

// Dumps writes v as json.dumps(v) would.
func Dumps(v any) ([]byte, error) {
	return pyEncoder{itemSep: ", "}.dumps(v)
}

// pyEncoder holds the json.dumps arguments that change its bytes.
type pyEncoder struct {
	// indent is json.dumps' indent: nil writes everything on one line,
	// else each item on its own line, indented by this many spaces per level.
	indent *int
	// itemSep is what separates items: ", " by default, "," with an indent.
	itemSep string
	// sortKeys sorts every object's keys (sort_keys=True); otherwise a
	// Object keeps its order and a Go map, which has none, is sorted.
	sortKeys bool
}

func (e pyEncoder) dumps(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := e.write(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newline starts an item at depth levels of indent, when there is one.
func (e pyEncoder) newline(buf *bytes.Buffer, depth int) {
	if e.indent == nil {
		return
	}
	buf.WriteByte('\n')
	buf.WriteString(strings.Repeat(" ", max(0, *e.indent)*depth))
}

func (e pyEncoder) write(buf *bytes.Buffer, v any, depth int) error {
	if depth > budget.MaxDepth {
		return send.Unbuildable("body nests deeper than %d levels", budget.MaxDepth)
	}
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		pyString(buf, x)
	case Int:
		buf.WriteString(string(x))
	case Float:
		buf.WriteString(FloatRepr(float64(x)))
	case float64:
		buf.WriteString(FloatRepr(x))
	case float32:
		buf.WriteString(FloatRepr(float64(x)))
	case int:
		buf.WriteString(strconv.Itoa(x))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case json.Number:
		n, err := pyNumber(string(x))
		if err != nil {
			return err
		}
		return e.write(buf, n, depth)
	case Object:
		if e.sortKeys {
			x = slices.SortedStableFunc(slices.Values(x), func(a, b Pair) int { return strings.Compare(a.Key, b.Key) })
		}
		return e.object(buf, len(x), func(i int) (string, any) { return x[i].Key, x[i].Value }, depth)
	case map[string]any:
		// A Go map has lost its order: sorted, as frappe.as_json sorts.
		keys := slices.Sorted(maps.Keys(x))
		return e.object(buf, len(keys), func(i int) (string, any) { return keys[i], x[keys[i]] }, depth)
	case []any:
		if len(x) == 0 {
			buf.WriteString("[]")
			return nil
		}
		buf.WriteByte('[')
		for i, item := range x {
			if i > 0 {
				buf.WriteString(e.itemSep)
			}
			e.newline(buf, depth+1)
			if err := e.write(buf, item, depth+1); err != nil {
				return err
			}
		}
		e.newline(buf, depth)
		buf.WriteByte(']')
	default:
		// default=str: what json cannot encode is sent as its text.
		pyString(buf, fmt.Sprint(x))
	}
	return nil
}

// object writes n pairs as a JSON object.
func (e pyEncoder) object(buf *bytes.Buffer, n int, pair func(int) (string, any), depth int) error {
	if n == 0 {
		buf.WriteString("{}")
		return nil
	}
	buf.WriteByte('{')
	for i := range n {
		if i > 0 {
			buf.WriteString(e.itemSep)
		}
		e.newline(buf, depth+1)
		k, v := pair(i)
		pyString(buf, k)
		buf.WriteString(": ")
		if err := e.write(buf, v, depth+1); err != nil {
			return err
		}
	}
	e.newline(buf, depth)
	buf.WriteByte('}')
	return nil
}

// pyString writes s as json.dumps does with ensure_ascii (Lib/json/encoder.py,
// py_encode_basestring_ascii).
func pyString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			buf.WriteString(`\"`)
		case r == '\\':
			buf.WriteString(`\\`)
		case r == '\n':
			buf.WriteString(`\n`)
		case r == '\r':
			buf.WriteString(`\r`)
		case r == '\t':
			buf.WriteString(`\t`)
		case r == '\b':
			buf.WriteString(`\b`)
		case r == '\f':
			buf.WriteString(`\f`)
		case r >= 0x20 && r <= 0x7e:
			buf.WriteByte(byte(r))
		case r > 0xffff:
			a, b := utf16.EncodeRune(r)
			fmt.Fprintf(buf, `\u%04x\u%04x`, a, b)
		case r == utf8.RuneError:
			buf.WriteString(`\ufffd`)
		default:
			fmt.Fprintf(buf, `\u%04x`, r)
		}
	}
	buf.WriteByte('"')
}

// FloatRepr is Python's repr of a float: the shortest digits that read
// back, positional between 1e-4 and 1e16, else d.ddde±XX.
func FloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, exp)
}

// pyNumber reads a JSON number literal as json.loads does: an int when it
// has no fraction or exponent (of any size), else a float.
func pyNumber(lit string) (any, error) {
	if !strings.ContainsAny(lit, ".eE") {
		n, ok := new(big.Int).SetString(lit, 10)
		if !ok {
			return nil, send.Unbuildable("number %q cannot be read", lit)
		}
		return Int(n.String()), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, send.Unbuildable("number %q cannot be read", lit)
	}
	return Float(f), nil
}

// Loads reads JSON text as json.loads does, keeping object key order
// (the last of duplicate keys wins, at its first place, as in a dict).
func Loads(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := pyLoadValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, send.Unbuildable("rendered body is not valid JSON: more than one value")
	}
	return v, nil
}

func pyLoadValue(dec *json.Decoder, depth int) (any, error) {
	if depth > budget.MaxDepth {
		return nil, send.Unbuildable("rendered body nests deeper than %d levels", budget.MaxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, send.Unbuildable("rendered body is not valid JSON: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var obj Object
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, send.Unbuildable("rendered body is not valid JSON: %v", err)
				}
				k, _ := kt.(string)
				v, err := pyLoadValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if i, ok := index[k]; ok {
					obj[i].Value = v
					continue
				}
				index[k] = len(obj)
				obj = append(obj, Pair{k, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, send.Unbuildable("rendered body is not valid JSON: %v", err)
			}
			if obj == nil {
				obj = Object{}
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := pyLoadValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, send.Unbuildable("rendered body is not valid JSON: %v", err)
			}
			return list, nil
		}
		return nil, send.Unbuildable("rendered body is not valid JSON: unexpected %v", t)
	case json.Number:
		return pyNumber(string(t))
	default:
		return t, nil
	}
}
