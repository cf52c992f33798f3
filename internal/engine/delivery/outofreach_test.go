package delivery

import (
	"time"
)

// outOfReach is a time limit no evaluation in these tests reaches (README,
// "Limits"): steps, sizes and memory stop every definition the tests
// evaluate on their own, so a test of those limits, or of a definition
// that passes them, sees the same outcome on any machine, however loaded,
// never the wall-clock time limit first. The tests of the time limit itself
// give a tiny one instead.
const outOfReach = time.Hour

// untimed is spec with the time limit out of reach.
func untimed(spec Spec) Spec {
	spec.TimeLimit = outOfReach
	return spec
}
