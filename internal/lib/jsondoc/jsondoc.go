// Package jsondoc decodes and encodes event documents on the delivery hot
// path, byte for byte as encoding/json does, in a fraction of its time.
//
// A worker decodes every event's document into a map (conditions and
// templates read it) and, for a webhook without a template, encodes the map
// again as the request body. With encoding/json those two steps were about
// a sixth of the worker's CPU (docs/performance.md, round 3). The functions
// here cover the shapes that occur in practice and report false for any
// other input; callers then take encoding/json's path, so a result or an
// error never differs from what encoding/json would have given.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// maxDepth bounds nesting; deeper documents take encoding/json's path.
const maxDepth = 1000

// Decode parses b as one JSON value the way encoding/json's Decoder with
// UseNumber followed by event.NormalizeNumbers does: objects become
// map[string]any (the last of duplicate keys wins), arrays []any, integral
// number literals that fit int64 become int64, other numbers float64 (or,
// when out of float64's range, the literal as a string). Surrounding
// whitespace is allowed; anything else after the value is not.
//
// ok is false when b is not valid JSON or holds something Decode leaves to
// encoding/json: a string with invalid UTF-8 or an escaped surrogate half,
// or nesting deeper than 1000.
func Decode(b []byte) (v any, ok bool) {
	d := decoder{b: b}
	d.space()
	v, ok = d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	return v, d.i == len(d.b)
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) || depth > maxDepth {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.string()
		return s, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		return d.literal()
	}
}

func (d *decoder) object(depth int) (any, bool) {
	m := make(map[string]any)
	if d.empty('}') {
		return m, true
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if !d.eat(':') {
			return nil, false
		}
		d.space()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		if more, ok := d.next('}'); !ok || !more {
			return m, ok
		}
	}
}

func (d *decoder) array(depth int) (any, bool) {
	a := []any{}
	if d.empty(']') {
		return a, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if more, ok := d.next(']'); !ok || !more {
			return a, ok
		}
	}
}

// empty consumes an opening bracket and reports whether its closing one
// follows at once.
func (d *decoder) empty(closing byte) bool {
	d.i++
	d.space()
	return d.eat(closing)
}

// eat consumes c when it is the next byte.
func (d *decoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// next reads what follows a member or an element: a comma (more follows)
// or the closing bracket; ok is false for anything else.
func (d *decoder) next(closing byte) (more, ok bool) {
	d.space()
	switch {
	case d.eat(','):
		d.space()
		return true, true
	case d.eat(closing):
		return false, true
	}
	return false, false
}

// string reads a string literal starting at its opening quote.
func (d *decoder) string() (string, bool) {
	d.i++ // "
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return "", false
}

// escaped finishes a string literal that holds an escape; d.i is at the
// first backslash, start just after the opening quote.
func (d *decoder) escaped(start int) (string, bool) {
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return "", false
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf8.ValidRune(r) {
				buf = utf8.AppendRune(buf, r)
				continue
			}
			// A surrogate half: encoding/json pairs or replaces it.
			if r < 0xD800 || r > 0xDBFF || d.i+1 >= len(d.b) || d.b[d.i] != '\\' || d.b[d.i+1] != 'u' {
				return "", false
			}
			d.i += 2
			lo, ok := d.hex4()
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return "", false
			}
			buf = utf8.AppendRune(buf, (r-0xD800)<<10|(lo-0xDC00)+0x10000)
		default:
			return "", false
		}
	}
	return "", false
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}

// number reads a number literal by JSON's grammar and converts it as
// NormalizeNumbers converts a json.Number.
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return nil, false
	}
	integral := true
	if d.i < len(d.b) && d.b[d.i] == '.' {
		integral = false
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		integral = false
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	lit := d.b[start:d.i]
	if integral {
		if n, ok := smallInt(lit); ok {
			return n, true
		}
	}
	// unsafe.String spares a copy per number: strconv keeps nothing of its
	// argument but what it copies into an error.
	s := unsafe.String(&lit[0], len(lit))
	if integral {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, true
	}
	return string(lit), true
}

// smallInt converts an integer literal of at most 18 digits, which always
// fits int64; ok is false for longer ones.
func smallInt(lit []byte) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range lit {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// digits consumes one or more decimal digits.
func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

func (d *decoder) literal() (any, bool) {
	rest := d.b[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "null":
		d.i += 4
		return nil, true
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.i += 5
		return false, true
	}
	return nil, false
}

// Marshal is json.Marshal without HTML escaping: a receiver should get
// "<b>" in a description, not "\u003cb\u003e". Append writes the bytes for
// the values a decoded document holds; encoding/json takes the rest.
func Marshal(v any) ([]byte, error) { return marshal(v, false) }

// MarshalFloats is Marshal with every float64 written so that it reads
// back as a float: a whole one gets ".0" (1500.0, where encoding/json
// writes 1500; from 1e21 on its text, 1e+21, reads as a float already).
// Decode keeps a number's kind (an integral literal is an int64, any other
// a float64), so a document it decoded is written with each number as its
// producer wrote it, up to the digits: 1500.0 as 1500.0, 1500 as 1500,
// 1.50 as 1.5.
func MarshalFloats(v any) ([]byte, error) { return marshal(v, true) }

func marshal(v any, floats bool) ([]byte, error) {
	if b, ok := appendValue(nil, v, 0, floats); ok {
		return b, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Append appends v's JSON encoding to dst exactly as a json.Encoder with
// SetEscapeHTML(false) writes it, without the newline: object keys sorted,
// integral numbers as integers, other floats in the shortest form with
// encoding/json's exponent rules. v may hold map[string]any, []any,
// string, int64, int, float64, bool and nil; ok is false for anything else
// (and for NaN, infinities and nesting deeper than 1000), and dst is then
// to be discarded.
func Append(dst []byte, v any) (out []byte, ok bool) {
	return appendValue(dst, v, 0, false)
}

// appendValue is Append, with MarshalFloats' floats when floats is set.
func appendValue(dst []byte, v any, depth int, floats bool) ([]byte, bool) {
	if depth > maxDepth {
		return dst, false
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return appendString(dst, x), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case float64:
		if floats {
			return appendFloatPoint(dst, x)
		}
		return appendFloat(dst, x)
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var ok bool
			if dst, ok = appendValue(dst, x[k], depth+1, floats); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, e, depth+1, floats); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	default:
		return dst, false
	}
}

// appendFloat is encoding/json's float64 encoder.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// appendFloatPoint is appendFloat with ".0" added to a text that would
// read back as an integer.
func appendFloatPoint(dst []byte, f float64) ([]byte, bool) {
	start := len(dst)
	dst, ok := appendFloat(dst, f)
	if ok && !bytes.ContainsAny(dst[start:], ".eE") {
		dst = append(dst, ".0"...)
	}
	return dst, ok
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string encoder without HTML escaping.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
