package template

import (
	"flag"
	"time"
)

// outOfReach is a time limit no evaluation in these tests reaches (README,
// "Limits"): steps, sizes and memory stop every definition the tests
// evaluate on their own, so a test of those limits, or of a definition
// that passes them, sees the same outcome on any machine, however loaded,
// never the wall-clock time limit first. The tests of the time limit itself
// give a tiny one instead.
const outOfReach = time.Hour

// untimedRender is renderTemplate with the time limit out of reach.
func untimedRender(src string, doc map[string]any, maxBytes int) ([]byte, error) {
	return Render(src, doc, maxBytes, outOfReach)
}

// fuzzing reports whether this run is fuzzing (go test -fuzz), not only
// running the seed corpus.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}
