package builtins

import (
	methods "github.com/homingdev/homing/internal/gonja/builtins/methods"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// Methods exports all builtins methods.
var Methods exec.Methods = methods.All
