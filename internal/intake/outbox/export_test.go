package outbox

// SetAfterEnqueue makes r stop after enqueuing a batch and before deleting
// its rows whenever fn returns an error, as a relay killed there would.
func SetAfterEnqueue(r *Relay, fn func() error) { r.afterEnqueue = fn }

// SetOnLookup makes r call fn after Recover looked up an event's task.
func SetOnLookup(r *Relay, fn func(eventID string)) { r.onLookup = fn }
