// Package template renders a webhook's Jinja templates (its body, its URL)
// with the event's document bound as `doc`, on Homing's copy of gonja
// (internal/gonja), under a budget (package budget). Compat frappe templates
// read as Frappe's Jinja does, with Frappe's filters and helpers (package
// python).
//
// Templates are Jinja as far as gonja v2 implements it, with these limits:
//
//   - A variable or field the document lacks is an error (gonja's strict
//     undefined mode); `is defined` and the default filter still work.
//   - include, import, from, extends, macro, call, block, trans and
//     recursive loops are refused when the template is parsed: the first
//     four would read server files, the rest allow unbounded recursion,
//     which overflows the Go stack and cannot be recovered from.
//   - Rendering runs on Homing's copy of gonja, which reports to
//     renderLimits: every expression, loop item and write costs a step
//     (MaxRenderSteps), the deadline (MaxRenderTime) is checked at every
//     step, every value an operator, filter, method or function builds is
//     charged before it is built when its size comes from an argument
//     ('x' * n, center, lipsum, range, replace, join, format…), no value and
//     no body may pass the body's size limit (delivery.Spec.MaxBytes), and
//     all the values one rendering builds may not pass RenderMemoryFactor
//     times that. Rendering happens in the caller's goroutine, so a
//     rendering stopped by a limit has stopped. Errors from a limit match
//     budget.ErrLimit; those of the time limit match budget.ErrTimeLimit and
//     not send.ErrUnbuildable, since load from other work can reach it
//     (budget.NoVerdict). Every other error wraps send.ErrUnbuildable.
//   - Every {{ }} is escaped for where it lands in the JSON body: inside a
//     JSON string its text is escaped, elsewhere it is written as one JSON
//     value (a string quoted, a number, true, false, null, a list or dict
//     as JSON). `| tojson` marks text as JSON, written as it is.
//   - gonja prints values inside strings the Python way: true as True,
//     none as nothing, a dict as {'a': 1}.
//   - Numbers that are whole are handed to the template as ints, so an
//     index decoded from JSON as 3.0 prints as 3. Compat frappe templates
//     and URL templates keep a float a float, as Python does: 1500.0 prints
//     as 1500.0.
package template
