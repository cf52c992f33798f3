// Package budget is the one allowance of time, steps and bytes that every
// evaluation of a webhook's definition gets: a template (body or URL) or a
// condition (expr or Python). Everything the evaluation does is charged to
// its Budget before it happens, and past the process's heap ceiling every
// evaluation stops, whatever its own budget says.
//
// Its errors say whether a stop is a verdict on the definition: the limits
// the same definition and document always meet (steps, sizes, memory:
// ErrLimit) are final, while the wall-clock time limit (ErrTimeLimit) and
// the heap ceiling (ErrOverloaded) are not (NoVerdict). Templates and
// conditions both build on it; it imports nothing of Homing.
package budget
