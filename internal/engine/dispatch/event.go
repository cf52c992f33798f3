package dispatch

import "github.com/homingdev/homing/internal/intake/event"

// Event is the document event the engine fans out and delivers (package
// event defines it, so that publishers need not import the engine).
type Event = event.Event
