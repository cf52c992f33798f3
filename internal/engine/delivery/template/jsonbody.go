package template

import (
	"fmt"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/gonja/exec"
	"github.com/homingdev/homing/internal/lib/jsondoc"
)

// rawJSON is text a template marked as JSON with `| tojson`. Outside a JSON
// string it is written as it is; inside one it is escaped like any value.
type rawJSON string

func (r rawJSON) String() string { return string(r) }

// jsonStringContent escapes v's text for the inside of a JSON string, so
// that it can neither close the string nor break out of it.
func jsonStringContent(v *exec.Value) ([]byte, error) {
	quoted, err := jsondoc.Marshal(v.String())
	if err != nil {
		return nil, send.Unbuildable("value cannot be written into a JSON string: %w", err)
	}
	return quoted[1 : len(quoted)-1], nil
}

// jsonValueOf writes v as one JSON value: a string is quoted and escaped, a
// number, boolean or none is written as JSON writes it, a list or dict as
// JSON, and what `| tojson` made as it is. Whatever a document holds, it
// stays one value: it cannot add a key or an element.
func jsonValueOf(v *exec.Value) ([]byte, error) {
	if raw, ok := v.Interface().(rawJSON); ok {
		return []byte(raw), nil
	}
	if v.IsNil() {
		return []byte("null"), nil
	}
	if v.IsString() {
		return jsondoc.Marshal(v.String())
	}
	plain := v.ToGoSimpleType(false)
	if err, ok := plain.(error); ok {
		return nil, send.Unbuildable("value %s cannot be written as JSON: %v", v.String(), err)
	}
	out, err := jsondoc.Marshal(plain)
	if err != nil {
		return nil, send.Unbuildable("value %s cannot be written as JSON: %v", fmt.Sprint(plain), err)
	}
	return out, nil
}
