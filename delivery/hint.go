package delivery

import (
	"regexp"
	"strings"
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
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
