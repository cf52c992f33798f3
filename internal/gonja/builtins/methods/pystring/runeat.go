package pystring

// RuneAt is the i-th character of s (a homing addition). It stands for
// utf8string.NewString(s).At(i) from golang.org/x/exp, which the fork no
// longer imports, and keeps its behaviour: it panics when s has no i-th
// character (a fill character of "", a format spec of one multi-byte
// character), as upstream did.
func RuneAt(s string, i int) rune {
	if i >= 0 {
		for _, r := range s {
			if i == 0 {
				return r
			}
			i--
		}
	}
	panic("utf8string: index out of range")
}
