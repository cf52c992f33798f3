// Package gonja is upstream gonja's root package (gonja.go, config.go),
// kept so that upstream's tests in tests/integration and tests/legacy run
// as they are written (a homing addition: the fork first omitted it).
// Homing's code does not use it: internal/engine/delivery/template builds its own
// environment, with limits, from the exec, builtins and loaders packages.
package gonja
