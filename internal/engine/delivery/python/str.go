package python

import (
	"github.com/homingdev/homing/internal/gonja/exec"
)

// Str is how Jinja in Frappe writes a value into text: Python's str(),
// so None is "None", booleans "True"/"False" and floats keep their point
// ("1500.0"); gonja's String already writes booleans and floats that way.
func Str(v *exec.Value) string {
	if v == nil || v.IsNil() {
		return "None"
	}
	return v.String()
}
