// Package recovery puts deliveries back on the road: retry one, recover many,
// or resend a frozen payload as a new delivery. Every path only makes rows
// Failed and due; the sweeper and the retry task do the sending, so there is
// never a second, parallel path that could double-send. A disabled tenant's
// deliveries are refused (tenant.ErrDisabled), and a delivery whose history
// holds a 2xx is never requeued: it reached its receiver.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	tenantpkg "github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/models"
)

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound = errors.New("delivery not found")
	// ErrInFlight means the delivery's latest attempt has not been recorded
	// yet; requeueing it now could send it twice.
	ErrInFlight = errors.New("delivery has an attempt in flight")
	// ErrDelivered means a Delivered delivery was asked to be retried; use
	// resend for a new delivery of the same payload.
	ErrDelivered = errors.New("delivery was delivered")
	// ErrNotBuilt means a delivery whose request was never built was asked
	// to be retried or resent, and it cannot be built now either: it kept
	// no document, its webhook is gone, or the webhook's definition still
	// fails with the document.
	ErrNotBuilt = errors.New("delivery was never built")
)

// messageError is an error with its own text that still matches err.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

// BatchSize is how many rows one recover statement touches.
const BatchSize = 500

// Service changes delivery states on an operator's request.
type Service struct {
	db         *gorm.DB
	clock      clock.Clock
	maxPayload int
	// actions charges retries, resends and recovers to their tenant's
	// action_rate (SetActions); nil charges nothing.
	actions *tenantpkg.Actions
}

// SetActions charges every retry, resend and recover (not a dry run) to
// its tenant's action_rate (tenant.Actions): serve's service does, so the
// API, the console and the portal are charged alike; the command line's,
// an operator's, does not. Call it before the service is in use.
func (s *Service) SetActions(a *tenantpkg.Actions) { s.actions = a }

// New builds a Service. maxPayload caps the bodies it builds for
// deliveries that were never built (delivery.max_payload_bytes; 0 is
// template.MaxRenderedBytes).
func New(db *gorm.DB, clk clock.Clock, maxPayload int) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Service{db: db, clock: clk, maxPayload: maxPayload}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// settled is the condition that a row's every attempt is recorded: a claimed
// attempt in flight has counted itself but not written its history yet.
const settled = "attempts = (SELECT COUNT(*) FROM delivery_attempts a WHERE a.delivery_id = deliveries.id)"

// requeuedError is the last_error of a row requeued and not tried since.
const requeuedError = "requeued by an operator"

// notRequeued leaves out the Failed rows a requeue already made due and that
// have not been tried since: recovering them again would change nothing, and
// two recovers at once must count each row once.
const notRequeued = "NOT (status = 'Failed' AND last_error = '" + requeuedError + "')"

// answered is the condition that a delivery's history holds a 2xx: it
// reached its receiver, whatever its status says. A status can disagree
// only when the outcome landed after the row was made final (a disable
// that ended rows in flight used to); requeueing such a row would send its
// body twice. Served by delivery_attempts_once (delivery_id, attempt).
const answered = "EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.delivery_id = deliveries.id AND a.class = '" + string(send.Class2xx) + "')"

// requeue makes the matching rows Failed and due now, with their retry budget
// renewed from where they stand (attempt numbers keep counting up, so the
// history stays unique). The status condition makes concurrent requeues of
// the same row count it once.
func (s *Service) requeue(tx *gorm.DB, now time.Time, built *dispatch.Built, statuses ...string) *gorm.DB {
	set := map[string]any{
		"status":      models.StatusFailed,
		"next_retry":  now,
		"max_retries": gorm.Expr("attempts + (SELECT COALESCE((SELECT w.max_retries FROM webhooks w WHERE w.id = deliveries.webhook_id), deliveries.max_retries))"),
		"last_error":  requeuedError,
		"updated_at":  now,
	}
	if built != nil {
		// Frozen here, as fan-out would have: every attempt from now on
		// replays this payload.
		set["payload"], set["headers"], set["url"] = built.Payload, built.Headers, built.URL
		tx = tx.Where("length(payload) = 0")
	}
	return tx.Model(&models.Delivery{}).Where("status IN ?", statuses).Where(settled).Where("NOT " + answered).Updates(set)
}

// build is the request of a delivery that has no payload (its body could
// not be built at fan-out), built from the document it kept with its
// webhook's current definition; nil for a delivery that has its payload.
// When it cannot be built, the error wraps ErrNotBuilt and says why and
// what to do.
func (s *Service) build(ctx context.Context, row models.Delivery) (*dispatch.Built, error) {
	if len(row.Payload) > 0 {
		return nil, nil
	}
	refuse := func(format string, args ...any) error {
		return &messageError{msg: fmt.Sprintf("delivery %s was never built (%s): ", row.ID, row.LastError) + fmt.Sprintf(format, args...), err: ErrNotBuilt}
	}
	if row.URLDoc == nil {
		return nil, refuse("it kept no document to build it from; publish the event again")
	}
	var hook models.Webhook
	err := s.db.WithContext(ctx).Where("id = ?", row.WebhookID).Take(&hook).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, refuse("its webhook %q was deleted", row.WebhookName)
	}
	if err != nil {
		return nil, fmt.Errorf("read webhook of delivery %s: %w", row.ID, err)
	}
	b, err := dispatch.BuildKept(hook, *row.URLDoc, s.maxPayload, s.now())
	if err != nil {
		return nil, refuse("webhook %q as it is now cannot build it either: %v (fix it with homing webhook update, check it with homing webhook preview, then try again)", hook.Name, err)
	}
	return &b, nil
}

// Retry makes one Exhausted or Failed delivery Failed and due now, with its
// attempt budget renewed. The next sweep enqueues it.
//
// A delivery whose body could not be built is built first, from the
// document it kept, with its webhook's current definition; when that fails
// too, Retry refuses with an error wrapping ErrNotBuilt and changes
// nothing.
//
// Only tenant's delivery is retried; another tenant's is ErrNotFound.
func (s *Service) Retry(ctx context.Context, tenant, id string) error {
	var row models.Delivery
	err := s.db.WithContext(ctx).Where("id = ? AND tenant = ?", id, models.TenantOr(tenant)).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%w: %q (see homing delivery list)", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("read delivery %s: %w", id, err)
	}
	if row.Status == models.StatusDelivered {
		return fmt.Errorf("%w: %s (use homing delivery resend %s to send its payload again)", ErrDelivered, id, id)
	}
	if err := tenantpkg.RequireEnabled(ctx, s.db, row.Tenant); err != nil {
		return err
	}
	if err := s.actions.Take(ctx, row.Tenant); err != nil {
		return err
	}
	var ok []int
	// Served by delivery_attempts_once (delivery_id, attempt).
	if err := s.db.WithContext(ctx).Model(&models.Attempt{}).Where("delivery_id = ? AND class = ?", id, send.Class2xx).
		Order("attempt").Limit(1).Pluck("attempt", &ok).Error; err != nil {
		return fmt.Errorf("read history of delivery %s: %w", id, err)
	}
	if len(ok) > 0 {
		return fmt.Errorf("%w: %s reached its receiver (attempt %d was answered 2xx, though the delivery is %s); use homing delivery resend %s to send its payload again",
			ErrDelivered, id, ok[0], row.Status, id)
	}
	built, err := s.build(ctx, row)
	if err != nil {
		return err
	}
	res := s.requeue(s.db.WithContext(ctx).Where("id = ?", id), s.now(), built, row.Status)
	if res.Error != nil {
		return fmt.Errorf("retry delivery %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 && built != nil {
		// Another retry built and requeued it first, or it changed since
		// it was read: it is not requeued twice.
		return fmt.Errorf("%w: %s changed while it was being built (see homing delivery show %s)", ErrInFlight, id, id)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: %s (try again once it is recorded)", ErrInFlight, id)
	}
	return nil
}

// Filter selects deliveries to recover.
type Filter struct {
	Webhook string
	Since   time.Duration // created within this long before now
	// Status is Exhausted or Failed; empty takes both, since during an
	// outage the deliveries still waiting for their retry are the Failed
	// ones, and those that gave up are Exhausted.
	Status string
}

// Statuses is what f recovers.
func (f Filter) Statuses() []string {
	if f.Status == "" {
		return []string{models.StatusFailed, models.StatusExhausted}
	}
	return []string{f.Status}
}

// Recover requeues every matching delivery in batches and returns how many
// it requeued (with dryRun, how many matched). A delivery that was never
// built is built first (Retry); one that still cannot be is left out. progress, when non-nil, is
// called after each batch with the running total and the number matched.
func (s *Service) Recover(ctx context.Context, tenant string, f Filter, dryRun bool, progress func(done, total int64)) (int64, error) {
	if f.Status != "" && f.Status != models.StatusExhausted && f.Status != models.StatusFailed {
		return 0, fmt.Errorf("status %q cannot be recovered: use Exhausted or Failed, or neither for both", f.Status)
	}
	if err := tenantpkg.RequireEnabled(ctx, s.db, tenant); err != nil {
		return 0, err
	}
	if !dryRun {
		if err := s.actions.Take(ctx, tenant); err != nil {
			return 0, err
		}
	}
	now := s.now()
	base := func() *gorm.DB {
		q := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("tenant = ?", models.TenantOr(tenant)).
			Where("status IN ?", f.Statuses()).Where(notRequeued).Where("NOT " + answered)
		if f.Webhook != "" {
			q = q.Where("webhook_name = ?", f.Webhook)
		}
		if f.Since > 0 {
			q = q.Where("created_at >= ?", now.Add(-f.Since))
		}
		return q
	}
	var total int64
	if err := base().Count(&total).Error; err != nil {
		return 0, fmt.Errorf("count deliveries to recover: %w", err)
	}
	if dryRun || total == 0 {
		return total, nil
	}
	var done int64
	cursor := ""
	for {
		var ids []string
		// Served by deliveries_status_created_tenant / the primary key.
		if err := base().Where("id > ?", cursor).Order("id").Limit(BatchSize).Pluck("id", &ids).Error; err != nil {
			return done, fmt.Errorf("select deliveries to recover: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		cursor = ids[len(ids)-1]
		res := s.requeue(s.db.WithContext(ctx).Where("id IN ?", ids).Where("length(payload) > 0").Where(notRequeued), now, nil, f.Statuses()...)
		if res.Error != nil {
			return done, fmt.Errorf("recover deliveries: %w", res.Error)
		}
		done += res.RowsAffected
		n, err := s.recoverUnbuilt(ctx, ids, now, f.Status)
		done += n
		if err != nil {
			return done, err
		}
		if progress != nil {
			progress(done, total)
		}
	}
	return done, nil
}

// recoverUnbuilt requeues the deliveries among ids that have no payload,
// each built first (build); one that cannot be built is left as it is.
func (s *Service) recoverUnbuilt(ctx context.Context, ids []string, now time.Time, status string) (int64, error) {
	var rows []models.Delivery
	// Served by the primary key.
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Where("status = ? AND length(payload) = 0", status).Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("select unbuilt deliveries to recover: %w", err)
	}
	var done int64
	for _, row := range rows {
		built, err := s.build(ctx, row)
		if errors.Is(err, ErrNotBuilt) {
			continue
		}
		if err != nil {
			return done, err
		}
		res := s.requeue(s.db.WithContext(ctx).Where("id = ?", row.ID), now, built, status)
		if res.Error != nil {
			return done, fmt.Errorf("recover delivery %s: %w", row.ID, res.Error)
		}
		done += res.RowsAffected
	}
	return done, nil
}

// Resend creates a new delivery of id's frozen payload and headers (even of
// a Delivered one), linked to the original, Failed and due now so the next
// sweep sends it. A delivery that was never built is built first (Retry),
// and not resent when it still cannot be. It returns the new delivery's ID. Each call is a new
// delivery; ResendOnce is the form that is safe to repeat.
func (s *Service) Resend(ctx context.Context, tenant, id string) (string, error) {
	newID, _, err := s.resend(ctx, tenant, id, "")
	return newID, err
}

// MaxKeyLength bounds a ResendOnce key.
const MaxKeyLength = 100

// ErrInvalidKey is a ResendOnce key that is empty, too long or not printable.
var ErrInvalidKey = errors.New("invalid idempotency key")

// ResendOnce is Resend made safe to repeat: however often it is called with
// the same key for the same delivery (a button pressed twice, a client
// retrying after a timeout), there is one new delivery, and every call
// returns its ID. created reports whether this call made it. The key is
// scoped to the delivery: the same key for another delivery is another
// resend.
func (s *Service) ResendOnce(ctx context.Context, tenant, id, key string) (newID string, created bool, err error) {
	if key == "" || len(key) > MaxKeyLength || strings.ContainsFunc(key, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) {
		return "", false, fmt.Errorf("%w: %q must be 1 to %d printable characters without spaces", ErrInvalidKey, key, MaxKeyLength)
	}
	return s.resend(ctx, tenant, id, key)
}

// resend makes the new delivery. Its event ID keeps the (event, webhook)
// key unique: "<event>/resend/<new id>" for a deliberate second delivery,
// or "<event>/resend/<key>", which the unique key then lets exist once.
func (s *Service) resend(ctx context.Context, tenant, id, key string) (string, bool, error) {
	var orig models.Delivery
	err := s.db.WithContext(ctx).Where("id = ? AND tenant = ?", id, models.TenantOr(tenant)).Take(&orig).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, fmt.Errorf("%w: %q (see homing delivery list)", ErrNotFound, id)
	}
	if err != nil {
		return "", false, fmt.Errorf("read delivery %s: %w", id, err)
	}
	if err := tenantpkg.RequireEnabled(ctx, s.db, orig.Tenant); err != nil {
		return "", false, err
	}
	if err := s.actions.Take(ctx, orig.Tenant); err != nil {
		return "", false, err
	}
	built, err := s.build(ctx, orig)
	if err != nil {
		return "", false, err
	}
	if built != nil {
		orig.Payload, orig.Headers, orig.URL = built.Payload, built.Headers, built.URL
	}
	now := s.now()
	maxRetries := orig.MaxRetries
	var hook models.Webhook
	if err := s.db.WithContext(ctx).Select("max_retries").Where("id = ?", orig.WebhookID).Take(&hook).Error; err == nil {
		maxRetries = hook.MaxRetries
	}
	newID := uuid.Must(uuid.NewV7()).String()
	suffix := newID
	if key != "" {
		suffix = key
	}
	from := orig.ID
	row := models.Delivery{
		ID: newID, Tenant: orig.Tenant, WebhookID: orig.WebhookID, WebhookName: orig.WebhookName,
		EventID: orig.EventID + "/resend/" + suffix,
		DocType: orig.DocType, DocName: orig.DocName, DocEvent: orig.DocEvent,
		Method: orig.Method, URL: orig.URL, URLDoc: orig.URLDoc, Headers: orig.Headers, Payload: orig.Payload,
		Status: models.StatusFailed, NextRetry: &now, MaxRetries: maxRetries,
		ResentFrom: &from, CreatedAt: now, UpdatedAt: now,
	}
	if orig.AcceptSeq != nil {
		// A resend of an ordered delivery is a new version of its
		// document: it takes a fresh place, at the back of its key, and
		// waits for the deliveries of the document accepted before it.
		// (Only PostgreSQL holds ordered rows.)
		var seq int64
		if err := s.db.WithContext(ctx).Raw("SELECT nextval('outbox_events_id_seq')").Scan(&seq).Error; err != nil {
			return "", false, fmt.Errorf("resend delivery %s: draw its place in its document's order: %w", id, err)
		}
		row.AcceptSeq = &seq
	}
	res := s.db.WithContext(ctx).
		Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "event_id"}, {Name: "webhook_id"}}, DoNothing: true}).
		Create(&row)
	if res.Error != nil {
		return "", false, fmt.Errorf("resend delivery %s: %w", id, res.Error)
	}
	if res.RowsAffected == 1 {
		return newID, true, nil
	}
	// The key was used before: answer with the delivery it made. Served by
	// deliveries_event_webhook (event_id, webhook_id).
	var existing models.Delivery
	if err := s.db.WithContext(ctx).Select("id").
		Where("event_id = ? AND webhook_id = ?", row.EventID, row.WebhookID).Take(&existing).Error; err != nil {
		return "", false, fmt.Errorf("read earlier resend of delivery %s: %w", id, err)
	}
	return existing.ID, false, nil
}
