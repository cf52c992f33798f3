package builtins

import controlStructures "github.com/homingdev/homing/internal/gonja/builtins/control_structures"

// ControlStructures exports all builtins controlStructures
var ControlStructures = controlStructures.All
