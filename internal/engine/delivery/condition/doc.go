// Package condition decides whether a document change fires a webhook. A
// condition is an expr-lang expression over doc (LanguageExpr, the default),
// or Python as Frappe's webhooks write it (LanguagePython: parsed with
// go.starlark.net, refused at compile outside the subset Frappe's conditions
// use, and evaluated with Python's semantics). Compile once, then Match from
// any number of goroutines.
//
// Every evaluation runs in the caller's goroutine under a budget
// (package budget): MaxSteps, MaxTime and the bytes its operators and
// built-ins build, each charged before it is built. Errors wrap
// send.ErrUnbuildable, but a stop that is no verdict on the condition
// (budget.NoVerdict).
package condition
