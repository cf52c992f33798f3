package template

import (
	"regexp"

	"github.com/homingdev/homing/internal/lib/suggest"
)

// unknownFilter is how the template parser refuses a filter it does not
// know (internal/gonja/parser, KnownFilter).
var unknownFilter = regexp.MustCompile(`unknown filter '([^']*)'`)

// withHint adds to a template parse error's description the fix it most
// likely needs: the closest known filter for a misspelt one.
func withHint(msg string) string {
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
