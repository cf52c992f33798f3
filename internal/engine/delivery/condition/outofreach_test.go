package condition

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

// untimedMatch is Match with the time limit out of reach.
func untimedMatch(c *Condition, doc map[string]any) (bool, error) {
	return c.MatchWithin(doc, time.Time{}, outOfReach)
}
