package delivery

import (
	"strings"

	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// Field picks one document field for a body built from fields. Fieldname
// is the document's name for it and Key the name the receiver gets it
// under, as in Frappe's "Webhook Data" table.
type Field struct {
	Fieldname string
	Key       string
}

// ParseField parses "fieldname=key", or "fieldname" alone when the receiver
// uses the document's own name. Spaces around either part are dropped.
func ParseField(s string) (Field, error) {
	name, key, hasKey := strings.Cut(s, "=")
	name, key = strings.TrimSpace(name), strings.TrimSpace(key)
	if name == "" {
		return Field{}, send.Unbuildable("field %q: fieldname is empty; write fieldname=key", s)
	}
	if !hasKey {
		key = name
	}
	if key == "" {
		return Field{}, send.Unbuildable("field %q: key after \"=\" is empty; write fieldname=key or just fieldname", s)
	}
	return Field{Fieldname: name, Key: key}, nil
}

// String gives the field back in the form ParseField reads.
func (f Field) String() string {
	if f.Key == "" || f.Key == f.Fieldname {
		return f.Fieldname
	}
	return f.Fieldname + "=" + f.Key
}

// resolve checks a field built without ParseField, taking an empty key to
// mean the fieldname.
func (f Field) resolve() (name, key string, err error) {
	if f.Fieldname == "" {
		return "", "", send.Unbuildable("field %q: fieldname is empty", f.String())
	}
	if f.Key == "" {
		return f.Fieldname, f.Fieldname, nil
	}
	return f.Fieldname, f.Key, nil
}
