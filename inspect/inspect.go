// Package inspect answers the operator's first question about a delivery: is
// this still going to be delivered or not, and what happened on each try.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// ErrNotFound is returned for an unknown delivery ID.
var ErrNotFound = errors.New("delivery not found")

// Delivery is a delivery as `homing delivery list --json` prints it.
type Delivery struct {
	ID             string     `json:"id"`
	Webhook        string     `json:"webhook"`
	EventID        string     `json:"event_id"`
	DocType        string     `json:"doc_type"`
	DocName        string     `json:"doc_name"`
	DocEvent       string     `json:"doc_event"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	MaxRetries     int        `json:"max_retries"`
	NextRetry      *time.Time `json:"next_retry"`
	Method         string     `json:"method"`
	URL            string     `json:"url"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// Attempt is one entry of a delivery's history.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode *int      `json:"status_code"`
	DurationMS int64     `json:"duration_ms"`
	Error      string    `json:"error"`
	Method     string    `json:"method"`
	URL        string    `json:"url"`
	Class      string    `json:"class"`
}

// Detail is a delivery as `homing delivery show --json` prints it.
type Detail struct {
	Delivery
	Headers      map[string]string `json:"headers"`
	Payload      string            `json:"payload"`
	LastResponse string            `json:"last_response"`
	ResentFrom   *string           `json:"resent_from,omitempty"`
	History      []Attempt         `json:"history"`
}

// Filter narrows a listing. Zero values do not filter.
type Filter struct {
	Status  string
	Webhook string
	EventID string
	Limit   int
}

// Statuses a filter may name.
var Statuses = []string{models.StatusDelivered, models.StatusFailed, models.StatusExhausted}

func summary(d models.Delivery) Delivery {
	var next *time.Time
	if d.NextRetry != nil {
		t := d.NextRetry.UTC()
		next = &t
	}
	return Delivery{
		ID: d.ID, Webhook: d.WebhookName, EventID: d.EventID, DocType: d.DocType, DocName: d.DocName,
		DocEvent: d.DocEvent, Status: d.Status, Attempts: d.Attempts, MaxRetries: d.MaxRetries,
		NextRetry: next, Method: d.Method, URL: d.URL, LastStatusCode: d.LastStatusCode,
		LastError: d.LastError, CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
}

// List returns deliveries, newest first.
func List(ctx context.Context, db *gorm.DB, f Filter) ([]Delivery, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	q := db.WithContext(ctx).Model(&models.Delivery{}).Omit("payload", "last_response", "headers")
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Webhook != "" {
		q = q.Where("webhook_name = ?", f.Webhook)
	}
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	var rows []models.Delivery
	if err := q.Order("created_at DESC, id DESC").Limit(f.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = summary(r)
	}
	return out, nil
}

// Show returns one delivery with its frozen request and attempt history.
func Show(ctx context.Context, db *gorm.DB, id string) (Detail, error) {
	var row models.Delivery
	err := db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Detail{}, fmt.Errorf("%w: %q (see homing delivery list)", ErrNotFound, id)
	}
	if err != nil {
		return Detail{}, fmt.Errorf("read delivery %s: %w", id, err)
	}
	var attempts []models.Attempt
	if err := db.WithContext(ctx).Where("delivery_id = ?", id).Order("attempt").Find(&attempts).Error; err != nil {
		return Detail{}, fmt.Errorf("read history of delivery %s: %w", id, err)
	}
	history := make([]Attempt, len(attempts))
	for i, a := range attempts {
		history[i] = Attempt{Attempt: a.Attempt, At: a.At.UTC(), StatusCode: a.StatusCode, DurationMS: a.DurationMS,
			Error: a.Error, Method: a.Method, URL: a.URL, Class: a.Class}
	}
	headers := map[string]string(row.Headers)
	if headers == nil {
		headers = map[string]string{}
	}
	return Detail{
		Delivery: summary(row), Headers: headers, Payload: string(row.Payload),
		LastResponse: row.LastResponse, ResentFrom: row.ResentFrom, History: history,
	}, nil
}
