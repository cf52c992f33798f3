package delivery

import (
	"regexp"
	"strings"

	"github.com/homingdev/homing/internal/suggest"
)

// unknownFilter is how the template parser refuses a filter it does not
// know (internal/gonja/parser, KnownFilter).
var unknownFilter = regexp.MustCompile(`unknown filter '([^']*)'`)

// assignInCondition is how expr refuses `doc.status = "Paid"`.
const assignInCondition = `unexpected token Operator("=")`

// withHint adds to a parse error's description the fix it most likely
// needs: `==` for a condition's `=`, the closest known filter for a
// misspelt one.
func withHint(msg string) string {
	if strings.Contains(msg, assignInCondition) {
		return msg + "; did you mean `==`? (`=` is not a comparison)"
	}
	if m := unknownFilter.FindStringSubmatch(msg); m != nil {
		if near := closest(m[1], templateFilters); near != "" {
			return msg + "; did you mean `" + near + "`?"
		}
	}
	return msg
}

// closest is the name in names nearest to s by edit distance, when it is
// near enough to be a misspelling (at most a third of s's length, at least
// 1), or "".
func closest(s string, names []string) string {
	best, bestD := "", max(1, len(s)/3)+1
	for _, n := range names {
		if d := suggest.Distance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
