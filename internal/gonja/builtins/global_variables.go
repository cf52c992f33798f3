package builtins

import "github.com/homingdev/homing/internal/gonja/exec"

var GlobalVariables = exec.NewContext(map[string]any{
	"gonja": map[string]any{
		"version": "v2.9.1",
	},
})
