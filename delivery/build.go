package delivery

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/jsondoc"
)

// ErrUnbuildable marks a request that can never be built: a bad template,
// a rendered body that is not JSON, a field the template needs that the
// document lacks, a bad form field, a bad URL. Retrying cannot help, so
// callers record such deliveries as Exhausted without sending. Every error
// from Build, ValidateTemplate, CompileCondition and Condition.Match wraps
// it and says in one line what was wrong.
var ErrUnbuildable = errors.New("request cannot be built")

// Request body structures, as a webhook stores them.
const (
	StructureJSON = "json"
	StructureForm = "form"
)

const (
	contentTypeJSON = "application/json"
	contentTypeForm = "application/x-www-form-urlencoded"
)

// maxDocDepth bounds how deeply Build follows nested maps and lists, so a
// document that contains itself fails instead of overflowing the stack.
const maxDocDepth = 1000

// Spec says how to turn a document into a request body. It mirrors
// Frappe's webhook settings: a JSON body is either a Jinja template or a
// list of fields, a form body is always a list of fields.
type Spec struct {
	// Structure is StructureJSON (the default when empty) or StructureForm.
	Structure string
	// Template is a Jinja template rendered with the document as `doc`.
	// It is used only for JSON bodies, and wins over Fields there; a form
	// body ignores it, as Frappe does. A blank template counts as none.
	Template string
	// Fields picks document fields and the keys they are sent under.
	Fields []Field
	// MaxBytes caps a rendered body and every value its template builds
	// (delivery.max_payload_bytes); 0 means MaxRenderedBytes.
	MaxBytes int
	// Compat is "" for Homing's bodies or CompatFrappe for the bytes
	// Frappe sends (buildFrappe), whose Content-Type comes only from the
	// webhook's headers (Build returns "").
	Compat string
	// Now is the time Frappe's date helpers read in a compat frappe
	// template (nowdate(), now()); zero is the wall clock.
	Now time.Time
	// TimeLimit is the rendering's wall-clock time limit; zero is
	// MaxRenderTime. Tests set a tiny one to meet it without load.
	TimeLimit time.Duration
}

// Build renders the body for doc and returns it with its Content-Type.
//
// A JSON body comes from Template when there is one, else from Fields as an
// object in list order (a field the document lacks is null), else from the
// whole document. A form body holds the listed fields in list order, or
// every top-level field in sorted order when none are listed. Build is safe
// for concurrent use, never panics, and every error it returns wraps
// ErrUnbuildable, but a stop that is no verdict on the definition
// (NoVerdict: the heap ceiling, the time limit).
func Build(spec Spec, doc map[string]any) (body []byte, contentType string, err error) {
	defer func() {
		if r := recover(); r != nil {
			body, contentType = nil, ""
			err = unbuildable("build body: %v", r)
		}
	}()

	if spec.Compat == CompatFrappe {
		if spec.Structure != "" && spec.Structure != StructureJSON && spec.Structure != StructureForm {
			return nil, "", unbuildable("structure %q is neither %q nor %q", spec.Structure, StructureJSON, StructureForm)
		}
		body, err = buildFrappe(spec, doc)
		return body, "", err
	}
	switch spec.Structure {
	case "", StructureJSON:
		switch {
		case strings.TrimSpace(spec.Template) != "":
			body, err = renderWithin(spec.Template, doc, spec.MaxBytes, cmp.Or(spec.TimeLimit, MaxRenderTime))
		case len(spec.Fields) > 0:
			body, err = fieldsJSON(spec.Fields, doc)
		default:
			body, err = documentJSON(doc)
		}
		if err != nil {
			return nil, "", err
		}
		return body, contentTypeJSON, nil
	case StructureForm:
		body, err = formBody(spec.Fields, doc)
		if err != nil {
			return nil, "", err
		}
		return body, contentTypeForm, nil
	default:
		return nil, "", unbuildable("structure %q is neither %q nor %q", spec.Structure, StructureJSON, StructureForm)
	}
}

// fieldsJSON writes the object by hand because a Go map would lose the
// order the webhook lists its fields in.
func fieldsJSON(fields []Field, doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	seen := make(map[string]bool, len(fields))
	buf.WriteByte('{')
	for i, f := range fields {
		name, key, err := f.resolve()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, unbuildable("fields: key %q is used twice", key)
		}
		seen[key] = true
		if i > 0 {
			buf.WriteByte(',')
		}
		encodedKey, err := encodeJSON(key)
		if err != nil {
			return nil, unbuildable("field %q: key cannot be encoded: %w", key, err)
		}
		buf.Write(encodedKey)
		buf.WriteByte(':')
		value, err := encodeJSON(doc[name])
		if err != nil {
			return nil, unbuildable("field %q: value cannot be encoded as JSON: %w", name, err)
		}
		buf.Write(value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func documentJSON(doc map[string]any) ([]byte, error) {
	if doc == nil {
		return []byte("{}"), nil
	}
	body, err := encodeJSON(doc)
	if err != nil {
		return nil, unbuildable("document cannot be encoded as JSON: %w", err)
	}
	return body, nil
}

// formBody builds the string by hand because url.Values.Encode sorts keys.
func formBody(fields []Field, doc map[string]any) ([]byte, error) {
	if len(fields) == 0 {
		for _, name := range slices.Sorted(maps.Keys(doc)) {
			fields = append(fields, Field{Fieldname: name, Key: name})
		}
	}
	var buf bytes.Buffer
	for i, f := range fields {
		name, key, err := f.resolve()
		if err != nil {
			return nil, err
		}
		value, err := formValue(doc[name])
		if err != nil {
			return nil, unbuildable("field %q: %w", name, err)
		}
		if i > 0 {
			buf.WriteByte('&')
		}
		buf.WriteString(url.QueryEscape(key))
		buf.WriteByte('=')
		buf.WriteString(url.QueryEscape(value))
	}
	return buf.Bytes(), nil
}

// formValue writes a value the way a person would type it into a form:
// strings as they are, integral numbers without an exponent, nested values
// as JSON.
func formValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return formatFloat(x), nil
	case float32:
		return formatFloat(float64(x)), nil
	case int:
		return strconv.Itoa(x), nil
	case int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), nil
	default:
		encoded, err := encodeJSON(x)
		if err != nil {
			return "", fmt.Errorf("value cannot be encoded: %w", err)
		}
		return string(encoded), nil
	}
}

func formatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	encoded, err := json.Marshal(f)
	if err != nil {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return string(encoded)
}

// encodeJSON is json.Marshal without HTML escaping: a receiver should get
// "<b>" in a description, not "\u003cb\u003e". jsondoc writes the same bytes
// for the values a decoded document holds; encoding/json takes the rest.
func encodeJSON(v any) ([]byte, error) {
	if b, ok := jsondoc.Append(nil, v); ok {
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

// copyDoc copies doc for a template. The copy keeps gonja's dict methods
// (doc.update and friends) away from the caller's map. Decoded JSON may
// hold a number as float64 or json.Number: by default an integral one
// becomes an int, since gonja would print an item index 3 as "3.0"; with
// keepFloats (Frappe's templates) a float stays a float (1500.0 renders as
// Python's "1500.0") and only int64 and json.Number integers become ints.
func copyDoc(doc map[string]any, keepFloats bool) (map[string]any, error) {
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

func copyValue(v any, depth int, keepFloats bool) (any, error) {
	if depth > maxDocDepth {
		return nil, unbuildable("document nests deeper than %d levels", maxDocDepth)
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

// unbuildableError carries a one-line reason and matches ErrUnbuildable
// without prefixing its text to every message.
type unbuildableError struct{ err error }

func (e *unbuildableError) Error() string { return e.err.Error() }

func (e *unbuildableError) Unwrap() []error { return []error{ErrUnbuildable, e.err} }

// unbuildable formats a reason like fmt.Errorf (so %w keeps causes
// reachable) and marks it as ErrUnbuildable.
func unbuildable(format string, args ...any) error {
	return &unbuildableError{err: fmt.Errorf(format, args...)}
}
