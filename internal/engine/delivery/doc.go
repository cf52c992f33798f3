// Package delivery turns a document into the body of a webhook's request.
// Build renders it from the webhook's definition (a Spec): a Jinja template,
// a list of fields (ParseField reads one), or the whole document, as JSON
// or as a form, or, for compat frappe, as the bytes Frappe sends.
//
// The parts it builds on are packages of their own below it, whose arrows
// point down only:
//
//   - template renders Jinja templates, bodies and URLs;
//   - condition decides whether a document fires a webhook at all (expr, or
//     Frappe's Python);
//   - python does with values what Frappe's Python does (json.dumps, str(),
//     frappe.utils);
//   - budget is one evaluation's allowance of time, steps and bytes, and the
//     errors of its limits;
//   - send makes one attempt at the receiver and classifies its outcome,
//     and holds ErrUnbuildable.
//
// Every failure that retrying cannot fix wraps send.ErrUnbuildable, with a
// one line message meant for the person who configured the webhook. A stop
// that is no verdict on the definition (budget.NoVerdict: the process's
// heap ceiling, the wall-clock time limit) does not.
package delivery
