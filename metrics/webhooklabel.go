package metrics

import "sync"

// OtherWebhooks is the webhook label of the webhooks beyond
// metrics.max_webhook_labels.
const OtherWebhooks = "other"

// webhookLabels bounds the webhook label: the first max webhook names seen
// keep their own, every later one is OtherWebhooks. A name keeps its label
// for the life of the process, so a series never changes meaning; the
// bound is what keeps a site with thousands of webhooks from making
// thousands of series per status and class.
type webhookLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// label is the label value for webhook name.
func (l *webhookLabels) label(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[name] {
		return name
	}
	if len(l.seen) >= l.max {
		return OtherWebhooks
	}
	l.seen[name] = true
	return name
}
