// Package python does with a document's values what Frappe's Python does,
// so that a compat frappe webhook sends Frappe's bytes: json.dumps and
// json.loads (Dumps, Loads, FloatRepr: 1500.0 stays "1500.0"), str() (Str),
// Jinja's json, tojson, sum, round and format filters with Python's
// semantics and Frappe's own (Filters), and the frappe.utils helpers that
// need no database (Utils, Globals). CopyDoc is the copy of a document a
// template or condition reads, where a float stays a float, as in Python,
// or a whole one becomes an int, as Homing's own templates want it.
package python
