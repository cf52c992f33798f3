package template

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// placeholders are the values a synthetic document gives every field a
// template names, one rendering each: a string, a number and an empty list
// (which a loop runs over zero times). A template that is JSON for some
// document is JSON for at least one of them in practice; one that is JSON
// for none of them fails on its own text.
var placeholders = []any{"placeholder", 1, []any{}}

// docRefRe finds the document paths a template names: doc.a, doc.a.b,
// doc["a"], doc['a'].b, doc.get("a").
var docRefRe = regexp.MustCompile(`\bdoc((?:\s*\.\s*get\s*\(\s*(?:"[^"]*"|'[^']*')|\s*\.\s*[A-Za-z_]\w*(?:\s*\()?|\s*\[\s*(?:"[^"]*"|'[^']*')\s*\])+)`)

// docSegRe splits one path into its field names; a method name (a
// segment followed by "(") is dropped by the caller.
var docSegRe = regexp.MustCompile(`\.\s*get\s*\(\s*(?:"([^"]*)"|'([^']*)')|\.\s*([A-Za-z_]\w*)(\s*\()?|\[\s*(?:"([^"]*)"|'([^']*)')\s*\]`)

// CheckProducesJSON reports a JSON body template that cannot produce JSON
// whatever the document holds (a trailing comma, a missing brace): it is
// rendered with a synthetic document that has every field the template
// names, once per placeholder kind, and refused only when every rendering
// succeeds and none is JSON. A rendering that fails for another reason
// (a placeholder of the wrong type) says nothing, and the template is not
// refused. The error wraps send.ErrUnbuildable and says where the body stops
// being JSON.
//
// frappe reads src as a compat frappe template, whose helpers read now;
// maxBytes is the body's size limit (zero is MaxRenderedBytes) and limit
// each rendering's time limit (zero is MaxRenderTime).
func CheckProducesJSON(src string, frappe bool, maxBytes int, now time.Time, limit time.Duration) error {
	if maxBytes <= 0 {
		maxBytes = MaxRenderedBytes
	}
	limit = cmp.Or(limit, MaxRenderTime)
	paths := templatePaths(src)
	var first error
	for _, leaf := range placeholders {
		body, err := renderRaw(src, frappe, syntheticDoc(paths, leaf), maxBytes, now, limit)
		if err != nil {
			return nil
		}
		jerr := notJSON(body)
		if jerr == nil {
			return nil
		}
		if first == nil {
			first = jerr
		}
	}
	return first
}

// renderRaw renders src as a body template is rendered, without the check
// that the result is JSON.
func renderRaw(src string, frappe bool, doc map[string]any, maxBytes int, now time.Time, limit time.Duration) (body []byte, err error) {
	if frappe {
		return RenderFrappe(src, doc, maxBytes, now, limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	defer recoverInto(&err)
	return render(ctx, src, doc, maxBytes, limit)
}

// notJSON says where body stops being JSON, by line and column of the
// rendered body and the text there.
func notJSON(body []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(body, &raw)
	if err == nil {
		return nil
	}
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		return send.Unbuildable("the body it renders is not JSON whatever the document holds: %s", err.Error())
	}
	at := max(0, min(len(body), int(syntax.Offset)-1))
	if int(syntax.Offset) >= len(body) && strings.HasPrefix(syntax.Error(), "unexpected end") {
		at = len(body)
	}
	line := 1 + strings.Count(string(body[:at]), "\n")
	col := at - strings.LastIndex(string(body[:at]), "\n")
	from, to := max(0, at-20), min(len(body), at+20)
	return send.Unbuildable("the body it renders is not JSON whatever the document holds: %s at line %d, column %d of the body (near %q)",
		syntax.Error(), line, col, body[from:to])
}

// templatePaths lists the document paths src names, each as its field
// names.
func templatePaths(src string) [][]string {
	var paths [][]string
	for _, m := range docRefRe.FindAllStringSubmatch(src, -1) {
		var path []string
		for _, s := range docSegRe.FindAllStringSubmatch(m[1], -1) {
			name := s[1] + s[2] + s[3] + s[5] + s[6]
			if s[4] != "" { // a method call: doc.items.append(…)
				break
			}
			path = append(path, name)
		}
		if len(path) > 0 {
			paths = append(paths, path)
		}
	}
	return paths
}

// syntheticDoc is a document that has every path, each ending in leaf; a
// field that is also a path's parent is an object.
func syntheticDoc(paths [][]string, leaf any) map[string]any {
	doc := map[string]any{}
	for _, path := range paths {
		m := doc
		for i, name := range path {
			if i == len(path)-1 {
				if _, ok := m[name].(map[string]any); !ok {
					m[name] = leaf
				}
				break
			}
			next, ok := m[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[name] = next
			}
			m = next
		}
	}
	return doc
}
