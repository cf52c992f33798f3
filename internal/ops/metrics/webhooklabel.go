package metrics

import "github.com/homingdev/homing/internal/ops/handoff"

// OtherWebhooks is the webhook label of the webhooks beyond
// metrics.max_webhook_labels.
const OtherWebhooks = handoff.Other
