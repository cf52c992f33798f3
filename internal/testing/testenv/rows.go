package testenv

import (
	"time"

	"github.com/homingdev/homing/models"
)

// PlannedDelivery is a Failed delivery of webhook for event, due a minute
// after now, as fan-out plans one: for tests that write rows directly.
func PlannedDelivery(id, event, webhook string, now time.Time) models.Delivery {
	next := now.Add(time.Minute)
	return models.Delivery{
		ID: id, WebhookID: webhook, WebhookName: "hook-" + webhook, EventID: event, DocType: "Sales Order", DocEvent: "on_submit",
		Method: "POST", URL: "http://127.0.0.1:1/", Headers: models.StringMap{"Content-Type": "application/json"},
		Payload: []byte(`{"name":"` + event + `"}`), Status: models.StatusFailed, MaxRetries: 3, NextRetry: &next,
		CreatedAt: now, UpdatedAt: now,
	}
}
