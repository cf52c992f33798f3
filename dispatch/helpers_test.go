package dispatch

import (
	"time"

	"github.com/homingdev/homing/models"
)

// planned is a Failed delivery of webhook for event, as fan-out plans it.
func planned(id, event, webhook string, now time.Time) models.Delivery {
	next := now.Add(time.Minute)
	return models.Delivery{
		ID: id, WebhookID: webhook, WebhookName: "hook-" + webhook, EventID: event, DocType: "Sales Order", DocEvent: "on_submit",
		Method: "POST", URL: "http://127.0.0.1:1/", Headers: models.StringMap{"Content-Type": "application/json"},
		Payload: []byte(`{"name":"` + event + `"}`), Status: models.StatusFailed, MaxRetries: 3, NextRetry: &next,
		CreatedAt: now, UpdatedAt: now,
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
