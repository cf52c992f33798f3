package template

import (
	"strings"
	"testing"
)

// A misspelt filter is refused with the fix it most likely needs; a name
// nowhere near a filter gets no guess.
func TestParseErrorsHintAtTheFix(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		`{"n": {{ doc.name | uper | tojson }}}`:  "did you mean `upper`?",
		`{"n": {{ doc.name | tojsn }}}`:          "did you mean `tojson`?",
		`{"n": {{ doc.name | lenght }}}`:         "did you mean `length`?",
		`{"n": {{ doc.name | frobnicate | e }}}`: "",
	} {
		err := Validate(src)
		if err == nil || !strings.Contains(err.Error(), "unknown filter") {
			t.Errorf("%s: %v; want an unknown filter", src, err)
			continue
		}
		if got := strings.Contains(err.Error(), "did you mean"); got != (want != "") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want the hint %q", src, err, want)
		}
	}
}
