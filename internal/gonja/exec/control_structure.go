package exec

import (
	"github.com/homingdev/homing/internal/gonja/nodes"
)

type ControlStructure interface {
	nodes.ControlStructure
	Execute(*Renderer, *nodes.ControlStructureBlock) error
}
