// Package delivery turns a document into a webhook request and sends it:
// Build renders the body (a gonja template, a list of fields, or the whole
// document, as JSON or as a form), Condition decides whether a document
// fires a webhook at all, ParseField and ParseHeader read a webhook's
// settings, and Sender makes one attempt and classifies its outcome.
//
// Every failure that retrying cannot fix wraps ErrUnbuildable, with a one
// line message meant for the person who configured the webhook. A stop that
// is no verdict on the definition (NoVerdict: the process's heap ceiling,
// the wall-clock time limit) does not.
//
// Templates are Jinja as far as gonja v2 implements it, with these limits:
//
//   - A variable or field the document lacks is an error (gonja's strict
//     undefined mode); `is defined` and the default filter still work.
//   - include, import, from, extends, macro, call, block, trans and
//     recursive loops are refused when the template is parsed: the first
//     four would read server files, the rest allow unbounded recursion,
//     which overflows the Go stack and cannot be recovered from.
//   - Rendering runs on Homing's copy of gonja (internal/gonja), which
//     reports to renderLimits: every expression, loop item and write costs
//     a step (MaxRenderSteps), the deadline (MaxRenderTime) is checked at
//     every step, every value an operator, filter, method or function
//     builds is charged before it is built when its size comes from an
//     argument ('x' * n, center, lipsum, range, replace, join, format…),
//     no value and no body may pass Spec.MaxBytes, and all the values one
//     rendering builds may not pass RenderMemoryFactor times that.
//     Rendering happens in the caller's goroutine, so a rendering stopped by
//     a limit has stopped. Errors from a limit match ErrLimit; those of the
//     time limit match ErrTimeLimit and not ErrUnbuildable, since load from
//     other work can reach it (NoVerdict).
//   - Every {{ }} is escaped for where it lands in the JSON body: inside a
//     JSON string its text is escaped, elsewhere it is written as one JSON
//     value (a string quoted, a number, true, false, null, a list or dict
//     as JSON). `| tojson` marks text as JSON, written as it is.
//   - gonja prints values inside strings the Python way: true as True,
//     none as nothing, a dict as {'a': 1}.
//   - Numbers that are whole are handed to the template as ints, so an
//     index decoded from JSON as 3.0 prints as 3.
package delivery
