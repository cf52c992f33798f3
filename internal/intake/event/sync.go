package event

import (
	"fmt"
	"strings"
)

// WebhookFailure is one webhook a synchronous delivery could not reach.
type WebhookFailure struct {
	Webhook    string `json:"webhook"`
	DeliveryID string `json:"delivery_id"`
	Error      string `json:"error"`
}

// SyncError reports every webhook a workflow_transition event failed to
// reach. Those deliveries are Exhausted: the transition is told now, and
// nothing retries them later.
type SyncError struct {
	EventID  string
	Failures []WebhookFailure
}

func (e *SyncError) Error() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = fmt.Sprintf("webhook %q: %s", f.Webhook, f.Error)
	}
	return fmt.Sprintf("event %s was not delivered to %d webhook(s): %s", e.EventID, len(e.Failures), strings.Join(parts, "; "))
}
