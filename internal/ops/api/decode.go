package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// decode reads the request body as one JSON object into v, refusing fields v
// does not have. The body is already limited to api.max_body_bytes.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err, v)
	}
	if err := checkBodyText(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, v)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "", "request body holds more than one JSON value: send one object")
	}
	return nil
}

// decodeError says what is wrong with a body that does not decode.
func decodeError(err error, v any) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	bad := func(field, format string, args ...any) error {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, field, format, args...)
	}
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return bad("", "request body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bad("", "request body ends in the middle of a JSON value")
	case errors.As(err, &se):
		return bad("", "request body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return bad("", "request body must be a JSON object, not %s", jsonKind(te.Value))
		}
		return bad(te.Field, "%s must be %s, not %s", te.Field, kindOf(te.Type), jsonKind(te.Value))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, uerr := strconv.Unquote(name); uerr == nil {
			name = unq
		}
		return bad(name, "unknown field %q (known fields: %s)", name, strings.Join(jsonFields(v), ", "))
	}
	return bad("", "request body cannot be read as JSON: %v", err)
}

// kindOf names what a Go type expects in JSON.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(kindOf(t.Elem()), "a "), "an ") + "s"
	case reflect.Map:
		return "an object of " + strings.TrimPrefix(strings.TrimPrefix(kindOf(t.Elem()), "a "), "an ") + "s"
	}
	return "an object"
}

// jsonKind names the JSON value the decoder found: "string", "number" ….
func jsonKind(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "number":
		return "a number"
	case strings.HasPrefix(v, "number "):
		return "a number (" + strings.TrimPrefix(v, "number ") + ")"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	}
	return v
}

// jsonFields lists the JSON names of the fields of the struct v points to.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return structFields(t)
}

func structFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, structFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// queryParams reads a request's query string, refusing parameters not in
// known and parameters given twice, so a misspelt filter is an error rather
// than a listing of everything.
func queryParams(r *http.Request, known ...string) (map[string]string, error) {
	out := map[string]string{}
	for name, values := range r.URL.Query() {
		if !slices.Contains(known, name) {
			return nil, invalidRequest(name, "unknown query parameter %q (known: %s)", name, strings.Join(known, ", "))
		}
		if len(values) > 1 {
			return nil, invalidRequest(name, "query parameter %q is given %d times; give it once", name, len(values))
		}
		out[name] = values[0]
	}
	return out, nil
}
