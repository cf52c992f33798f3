// Package delivery turns a document into a webhook request and sends it:
// Build renders the body (a gonja template, a list of fields, or the whole
// document, as JSON or as a form), Condition decides whether a document
// fires a webhook at all, ParseField and ParseHeader read a webhook's
// settings, and Sender makes one attempt and classifies its outcome.
//
// Every failure that retrying cannot fix wraps ErrUnbuildable, with a one
// line message meant for the person who configured the webhook.
//
// Templates are Jinja as far as gonja v2 implements it, with these limits:
//
//   - A variable or field the document lacks is an error (gonja's strict
//     undefined mode); `is defined` and the default filter still work.
//   - include, import, from, extends, macro, call, block, trans and
//     recursive loops are refused when the template is parsed: the first
//     four would read server files, the rest allow unbounded recursion,
//     which overflows the Go stack and cannot be recovered from.
//   - Rendering has a budget of MaxRenderSteps, a MaxRenderedBytes cap on
//     its output and a MaxRenderTime watchdog. A single operation inside
//     gonja, such as `"x" * 10000000000` or a huge padding width, is not
//     interrupted: it allocates before any check runs, and the rendering
//     goroutine outlives the watchdog until it finishes.
//   - gonja prints values the Python way: true as True, none as nothing,
//     a dict as {'a': 1}. Use `| tojson` for anything but plain strings
//     and numbers; tojson escapes <, > and & as \u003c and so on.
//   - Numbers that are whole are handed to the template as ints, so an
//     index decoded from JSON as 3.0 prints as 3.
package delivery
