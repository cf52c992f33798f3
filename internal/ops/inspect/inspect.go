// Package inspect answers the operator's first question about a delivery: is
// this still going to be delivered or not, and what happened on each try.
package inspect

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/models"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrNotFound is returned for an unknown delivery ID.
	ErrNotFound = errors.New("delivery not found")
	// ErrBadCursor is returned for a cursor ListPage did not make.
	ErrBadCursor = errors.New("invalid cursor")
)

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

// AttemptsText is how every view shows a delivery's attempts: those made
// over those it may make in all, "1/4" for a first attempt under
// max_retries 3. The row's max_retries counts retries after the first
// attempt, hence the +1; a retry or recover by an operator raises it to the
// attempts made plus the webhook's max_retries, so a recovered "4/4" reads
// "4/8" and the rest of the schedule shows as what is left.
func (d Delivery) AttemptsText() string {
	return fmt.Sprintf("%d/%d", d.Attempts, d.MaxRetries+1)
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
	// Response is the first KiB of the receiver's answer; only the console
	// shows it.
	Response string `json:"-"`
}

// Detail is a delivery as `homing delivery show --json` prints it.
type Detail struct {
	Delivery
	Headers      map[string]string `json:"headers"`
	Payload      string            `json:"payload"`
	LastResponse string            `json:"last_response"`
	ResentFrom   *string           `json:"resent_from,omitempty"`
	// WaitsFor is the delivery this one is held behind: the one before it
	// of its document that is not final yet, its webhook being ordered
	// (ordering "document"). WaitsForEvent is set instead when what it
	// waits for is an event of its document accepted before it and not
	// fanned out yet. Both are read when shown, never stored.
	WaitsFor      string    `json:"waits_for,omitempty"`
	WaitsForEvent string    `json:"waits_for_event,omitempty"`
	History       []Attempt `json:"history"`
	// SentSignature is the signature headers of the last attempt as sent,
	// with the signatures themselves masked (webhook-signature: v1,****):
	// enough to see which scheme and secrets a receiver was shown, never
	// a signature to replay. Only the text form of delivery show prints it.
	SentSignature map[string]string `json:"-"`
}

// Filter narrows a listing. Zero values do not filter.
type Filter struct {
	Status  string
	Webhook string
	EventID string
	// DocType and DocName pick one document's deliveries; DocName needs
	// DocType, since a name is unique only within its doctype (and the
	// index deliveries_doc is keyed by both).
	DocType string
	DocName string
	// Since (inclusive) and Until (exclusive) bound created_at.
	Since time.Time
	Until time.Time
	Limit int
	// Cursor continues a listing where an earlier page ended (its
	// NextCursor); "" starts from the newest.
	Cursor string
}

// Page is one page of a listing, newest first.
type Page struct {
	Deliveries []Delivery `json:"deliveries"`
	// NextCursor continues the listing after the last delivery of this
	// page; nil when there is nothing more.
	NextCursor *string `json:"next_cursor"`
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

// List returns tenant's deliveries, newest first.
func List(ctx context.Context, db *gorm.DB, tenant string, f Filter) ([]Delivery, error) {
	p, err := ListPage(ctx, db, tenant, f)
	return p.Deliveries, err
}

// position is where a page ended: the listing's sort key of its last row.
type position struct {
	CreatedAt time.Time `json:"c"`
	ID        string    `json:"i"`
}

// encodeCursor makes the opaque cursor of a position.
func encodeCursor(p position) string {
	b, _ := json.Marshal(p) // a time and a string always encode
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (position, error) {
	var p position
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.ID == "" || p.CreatedAt.IsZero() {
		return position{}, fmt.Errorf("%w: %q is not a cursor this listing returned (start again without one)", ErrBadCursor, s)
	}
	return p, nil
}

// ErrDocNameWithoutType is returned for a filter naming a document but not
// its doctype.
var ErrDocNameWithoutType = errors.New("a document name filter needs its doctype")

// ListPage returns at most f.Limit deliveries (default 50), newest first,
// after f.Cursor, and the cursor of the page that follows. Paging is by key
// (created_at, id), not by offset, so rows created while a client pages
// through never shift a page: nothing is skipped or shown twice.
//
// Only tenant's deliveries are listed. The tenant is one more equality
// before the indexed filter's range; deliveries_tenant_created serves an
// unfiltered listing, and the others are served as before with the tenant
// checked on each row (which, outside the default tenant, leaves a tenant
// whose rows are rare among another's paying for the scan: see issue 26).
func ListPage(ctx context.Context, db *gorm.DB, tenant string, f Filter) (Page, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.DocName != "" && f.DocType == "" {
		return Page{Deliveries: []Delivery{}}, fmt.Errorf("%w: name the doctype of %q too", ErrDocNameWithoutType, f.DocName)
	}
	// Each filter leads with an indexed column and every index ends in
	// created_at, so a page is an index range scan in listing order:
	// deliveries_created (none, or only since/until), deliveries_status_created_tenant,
	// deliveries_webhook_created, deliveries_event_webhook (event_id) and
	// deliveries_doc (doc_type, doc_name).
	q := db.WithContext(ctx).Model(&models.Delivery{}).Omit("payload", "last_response", "headers").
		Where("tenant = ?", models.TenantOr(tenant))
	if f.Cursor != "" {
		after, err := decodeCursor(f.Cursor)
		if err != nil {
			return Page{Deliveries: []Delivery{}}, err
		}
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", after.CreatedAt, after.CreatedAt, after.ID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Webhook != "" {
		q = q.Where("webhook_name = ?", f.Webhook)
	}
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	if f.DocType != "" {
		q = q.Where("doc_type = ?", f.DocType)
	}
	if f.DocName != "" {
		q = q.Where("doc_name = ?", f.DocName)
	}
	if !f.Since.IsZero() {
		q = q.Where("created_at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("created_at < ?", f.Until.UTC())
	}
	var rows []models.Delivery
	// One row more than asked says whether another page follows.
	if err := q.Order("created_at DESC, id DESC").Limit(f.Limit + 1).Find(&rows).Error; err != nil {
		return Page{Deliveries: []Delivery{}}, fmt.Errorf("list deliveries: %w", err)
	}
	page := Page{Deliveries: make([]Delivery, 0, min(len(rows), f.Limit))}
	for i, r := range rows {
		if i == f.Limit {
			last := rows[i-1]
			next := encodeCursor(position{CreatedAt: last.CreatedAt.UTC(), ID: last.ID})
			page.NextCursor = &next
			break
		}
		page.Deliveries = append(page.Deliveries, summary(r))
	}
	return page, nil
}

// WebhookKnown says whether name is a webhook, or was one that left
// deliveries behind: a listing filtered by an unknown name is empty because of
// a typo, not because nothing happened. Both reads are indexed (the webhooks'
// unique name, deliveries_webhook_created).
func WebhookKnown(ctx context.Context, db *gorm.DB, tenant, name string) (bool, error) {
	tenant = models.TenantOr(tenant)
	var n int64
	if err := db.WithContext(ctx).Model(&models.Webhook{}).Where("tenant = ? AND name = ?", tenant, name).Limit(1).Count(&n).Error; err != nil {
		return false, fmt.Errorf("look up webhook %q: %w", name, err)
	}
	if n > 0 {
		return true, nil
	}
	var ids []string
	if err := db.WithContext(ctx).Model(&models.Delivery{}).Where("webhook_name = ? AND tenant = ?", name, tenant).Limit(1).Pluck("id", &ids).Error; err != nil {
		return false, fmt.Errorf("look up deliveries of webhook %q: %w", name, err)
	}
	return len(ids) > 0, nil
}

// Show returns tenant's delivery id with its frozen request and attempt
// history; another tenant's is ErrNotFound, as if it did not exist.
func Show(ctx context.Context, db *gorm.DB, tenant, id string) (Detail, error) {
	var row models.Delivery
	err := db.WithContext(ctx).Where("id = ? AND tenant = ?", id, models.TenantOr(tenant)).Take(&row).Error
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
			Error: a.Error, Method: a.Method, URL: a.URL, Class: a.Class, Response: firstKiB(a.Response)}
	}
	// Rows written before credential headers were sealed may hold one.
	headers := webhook.MaskedHeaders(row.Headers)
	var sent map[string]string
	if n := len(attempts); n > 0 {
		sent = signatureHeaders(attempts[n-1].RequestHeaders)
	}
	d := Detail{
		Delivery: summary(row), Headers: headers, Payload: string(row.Payload),
		LastResponse: row.LastResponse, ResentFrom: row.ResentFrom, History: history,
		SentSignature: sent,
	}
	waits, event, err := storage.WaitsFor(ctx, db, row)
	if err != nil {
		return Detail{}, err
	}
	if event {
		d.WaitsForEvent = waits
	} else {
		d.WaitsFor = waits
	}
	return d, nil
}

// signatureHeaders picks the signing headers out of the headers an attempt
// sent, masking each signature but keeping its version prefix ("v1,").
func signatureHeaders(sent map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range sent {
		switch {
		case strings.EqualFold(k, signing.HeaderID), strings.EqualFold(k, signing.HeaderTimestamp):
			out[k] = v
		case strings.EqualFold(k, signing.HeaderSignature):
			sigs := strings.Fields(v)
			for i, sig := range sigs {
				version, _, _ := strings.Cut(sig, ",")
				sigs[i] = version + "," + send.Masked
			}
			out[k] = strings.Join(sigs, " ")
		case strings.EqualFold(k, signing.HeaderFrappe):
			out[k] = send.Masked
		}
	}
	return out
}

// firstKiB cuts s to at most 1,024 bytes, at a rune boundary.
func firstKiB(s string) string {
	if len(s) <= 1024 {
		return s
	}
	s = s[:1024]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
