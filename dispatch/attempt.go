package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/logging"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/signing"
	"github.com/homingdev/homing/webhook"
)

// Mode says which state an attempt may claim a delivery from.
type Mode int

const (
	// First is the first attempt run by the task fan-out enqueued: the row
	// is Failed with no attempt made yet.
	First Mode = iota
	// Retry is a retry enqueued by the sweeper: the row is Failed and due.
	Retry
	// Sync is workflow_transition's one attempt in the publisher: the row is
	// already final (Exhausted) and becomes Delivered only on success.
	Sync
)

func (m Mode) String() string {
	switch m {
	case First:
		return "first"
	case Retry:
		return "retry"
	default:
		return "sync"
	}
}

// responseSnippet is how much of a response the attempt history keeps; the
// delivery row keeps the last response up to delivery.MaxResponseBytes.
const responseSnippet = 1 << 10

// Outcome is what one attempt did.
type Outcome struct {
	// Status is the delivery's status after the attempt.
	Status string
	// Sent is false when no request was made (webhook disabled or deleted).
	Sent   bool
	Result delivery.Result
	// Attempt is the attempt number just made.
	Attempt int
	// NextRetry is set when another attempt is scheduled.
	NextRetry *time.Time
	// Reason is the error recorded on the delivery, if any.
	Reason string
	// Postponed is set when no request was made because the webhook's
	// rate_limit was spent: the delivery is due again at NextRetry, with
	// no attempt counted.
	Postponed bool
}

// Observer is told of each outcome the dispatcher has committed, so that
// metrics count what the database holds, not what was tried. It runs on the
// attempt's goroutine: implementations are fast and safe for concurrent use.
type Observer interface {
	// Attempt reports one request of webhook's delivery by its
	// delivery.Class ("2xx", "5xx", "timeout" …), how long it took, and the
	// status it left the delivery in: Delivered, Failed (a retry is
	// scheduled) or Exhausted. The status is empty when the delivery
	// changed while the request was in flight and kept the state it was
	// given.
	Attempt(webhook, class string, d time.Duration, status string)
	// Abandoned reports webhook's delivery made final (Exhausted) without
	// a request, because the webhook is disabled or deleted.
	Abandoned(webhook, status string)
	// Postponed reports an attempt that was not made and left its delivery
	// due later, with no attempt counted: "rate_limit" (its webhook's
	// rate_limit was spent) or "held" (its webhook is failing and this
	// retry is not the probe).
	Postponed(reason string)
}

// SetObserver sets the observer Config.Observer would have set, for a
// process that builds its metrics after the dispatcher (the worker). Call it
// before the dispatcher is in use; nil means none.
func (d *Dispatcher) SetObserver(o Observer) { d.observer = o }

// Attempt makes one attempt of delivery id: load → claim → send → record.
// Receiver failures are recorded, not returned: the error is non-nil only
// when the attempt could not be claimed (ErrNotClaimed), when the database
// failed, or when ctx was cancelled mid-request (the claim is then released
// so the task can run again).
func (d *Dispatcher) Attempt(ctx context.Context, id string, mode Mode) (Outcome, error) {
	now := d.now()
	// The common case in one round trip: claim and read the row and its
	// webhook together. When that claims nothing, the path below finds out
	// why and answers as it always has.
	if c, ok, err := d.claimJoined(ctx, id, mode, now); err != nil {
		return Outcome{}, err
	} else if ok {
		// A secret that cannot be opened is this worker's configuration
		// problem (a wrong secrets.key), not the receiver's: fail the task,
		// and give the row back as it was.
		secrets, err := d.secrets(&c.hook, now)
		if err != nil {
			if rerr := d.unclaim(c); rerr != nil {
				return Outcome{}, errors.Join(err, rerr)
			}
			return Outcome{}, d.secretFailed(id, err)
		}
		return d.send(ctx, c.row, mode, &c.hook, secrets, now)
	}
	row, hook, err := d.load(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	if !claimable(row, mode, now) {
		return Outcome{}, fmt.Errorf("delivery %s (%s, %d attempts) for a %s attempt: %w", id, row.Status, row.Attempts, mode, ErrNotClaimed)
	}
	if hook == nil || !hook.Enabled {
		reason := "webhook deleted"
		if hook != nil {
			reason = "webhook disabled"
			if hook.DisabledReason != "" {
				reason += ": " + hook.DisabledReason
			}
		}
		return d.abandon(ctx, row, reason)
	}
	if err := d.holdIfFailing(ctx, row, mode, hook); err != nil {
		return Outcome{}, err
	}
	// A secret that cannot be opened is this worker's configuration problem
	// (a wrong secrets.key), not the receiver's: fail the task, keep the row.
	secrets, err := d.secrets(hook, now)
	if err != nil {
		return Outcome{}, d.secretFailed(id, err)
	}
	claimed, err := d.claim(ctx, row, mode, hook, now)
	if err != nil {
		return Outcome{}, err
	}
	return d.send(ctx, claimed, mode, hook, secrets, now)
}

// send makes the request of a claimed attempt and records its outcome. A
// request interrupted by the caller's shutdown releases the claim instead.
func (d *Dispatcher) send(ctx context.Context, claimed models.Delivery, mode Mode, hook *models.Webhook, secrets []signing.Secret, now time.Time) (Outcome, error) {
	if mode != Sync && hook.RateLimit > 0 && d.limiter != nil {
		if out, done, err := d.limit(ctx, claimed, hook, now); done {
			return out, err
		}
	}
	if err := d.loadHeaders(ctx, hook); err != nil {
		return Outcome{}, err
	}
	req, err := d.request(claimed, hook, secrets, now)
	if err != nil {
		// Like a secret that cannot be opened: this worker's configuration,
		// not the receiver's. The claim's lease brings the row back.
		return Outcome{}, err
	}
	res := d.sender.Send(ctx, req)
	if errors.Is(res.Err, context.Canceled) && mode != Sync {
		if rerr := d.release(claimed, d.now()); rerr != nil {
			return Outcome{}, errors.Join(res.Err, rerr)
		}
		return Outcome{}, fmt.Errorf("attempt of delivery %s interrupted: %w", claimed.ID, res.Err)
	}
	return d.recordSent(ctx, claimed, mode, hook, now, req, res)
}

// load reads the delivery and its webhook (nil when the webhook is gone).
func (d *Dispatcher) load(ctx context.Context, id string) (models.Delivery, *models.Webhook, error) {
	var row models.Delivery
	if err := d.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return row, nil, fmt.Errorf("delivery %s does not exist: %w", id, ErrNotClaimed)
		}
		return row, nil, fmt.Errorf("load delivery %s: %w", id, err)
	}
	var hook models.Webhook
	err := d.db.WithContext(ctx).Where("id = ?", row.WebhookID).Take(&hook).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return row, nil, nil
	case err != nil:
		return row, nil, fmt.Errorf("load webhook of delivery %s: %w", id, err)
	}
	return row, &hook, nil
}

func claimable(row models.Delivery, mode Mode, now time.Time) bool {
	switch mode {
	case First:
		return row.Status == models.StatusFailed && row.Attempts == 0
	case Retry:
		return row.Status == models.StatusFailed && row.NextRetry != nil && !row.NextRetry.After(now)
	default:
		return row.Status == models.StatusExhausted && row.Attempts == 0
	}
}

// claim takes the delivery with one conditional UPDATE: it counts the attempt
// and, for Failed rows, moves next_retry past the attempt's timeout (a lease).
// The WHERE clause repeats what load saw, so of two tasks racing for the same
// row exactly one sends.
func (d *Dispatcher) claim(ctx context.Context, row models.Delivery, mode Mode, hook *models.Webhook, now time.Time) (models.Delivery, error) {
	updates := map[string]any{"attempts": gorm.Expr("attempts + 1"), "updated_at": now}
	if mode != Sync {
		lease := now.Add(hook.Timeout() + claimMargin)
		updates["next_retry"] = lease
		row.NextRetry = &lease
	}
	q := d.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", row.ID, row.Status, row.Attempts)
	if mode == Retry {
		q = q.Where("next_retry <= ?", now)
	}
	res := q.Updates(updates)
	if res.Error != nil {
		return row, fmt.Errorf("claim delivery %s: %w", row.ID, res.Error)
	}
	if res.RowsAffected != 1 {
		return row, fmt.Errorf("delivery %s was taken by another attempt: %w", row.ID, ErrNotClaimed)
	}
	row.Attempts++
	return row, nil
}

// release undoes a claim whose request was not made (interrupted by
// shutdown, or postponed by the rate limit), making the row due again at
// at, with its attempt uncounted, so the requeued task (or a sweep) can
// claim it.
func (d *Dispatcher) release(row models.Delivery, at time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", row.ID, models.StatusFailed, row.Attempts).
		Updates(map[string]any{"attempts": gorm.Expr("attempts - 1"), "next_retry": at, "updated_at": d.now()}).Error
	if err != nil {
		return fmt.Errorf("release delivery %s: %w", row.ID, err)
	}
	return nil
}

// request builds the HTTP request of this attempt: the frozen payload and
// headers, the webhook's current URL (or, for a webhook with a URL
// template, the URL rendered from the event's document at fan-out), method,
// redirect limit and credential (sealed) headers, fresh signatures.
func (d *Dispatcher) request(row models.Delivery, hook *models.Webhook, secrets []signing.Secret, now time.Time) (delivery.Request, error) {
	h := make(http.Header, len(row.Headers)+4)
	for k, v := range row.Headers {
		h.Set(k, v)
	}
	for k, v := range hook.Headers {
		if !webhook.FromWebhook(k, v) {
			continue
		}
		plain, err := webhook.OpenHeader(d.box, v)
		if err != nil {
			return delivery.Request{}, fmt.Errorf("webhook %q: header %s: %w", hook.Name, k, err)
		}
		h.Set(k, plain)
	}
	scheme := hook.SignatureScheme
	if len(secrets) == 0 {
		scheme = signing.SchemeNone
	}
	signing.Sign(h, scheme, secrets, row.ID, now, row.Payload)
	url, err := d.url(row, hook)
	if err != nil {
		return delivery.Request{}, fmt.Errorf("webhook %q: %w", hook.Name, err)
	}
	return delivery.Request{
		Method:          hook.RequestMethod,
		URL:             url,
		Header:          h,
		Body:            row.Payload,
		Timeout:         hook.Timeout(),
		FollowRedirects: hook.FollowRedirects,
	}, nil
}

// url is where this attempt goes: the webhook's URL or, for a webhook with
// a url_template, its current template rendered with the document the
// delivery keeps (a template fixed since reaches the retries still due, and
// a resend). A row without the document (made before it was kept) goes to
// the URL rendered at fan-out.
func (d *Dispatcher) url(row models.Delivery, hook *models.Webhook) (string, error) {
	switch {
	case hook.URLTemplate == "" || row.URL == "":
		return hook.RequestURL, nil
	case row.URLDoc != nil:
		return delivery.RenderFrozenURL(hook.URLTemplate, *row.URLDoc, hook.Compat)
	}
	return row.URL, nil
}

// secrets opens the webhook's current secret and those still inside their
// rotation grace period, current first.
func (d *Dispatcher) secrets(hook *models.Webhook, now time.Time) ([]signing.Secret, error) {
	if hook.Secret == "" {
		return nil, nil
	}
	plain, err := d.box.Open(hook.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook %q: open secret: %w", hook.Name, err)
	}
	out := []signing.Secret{signing.Secret(plain)}
	for _, p := range hook.PreviousSecrets {
		if !p.ExpiresAt.After(now) {
			continue
		}
		old, err := d.box.Open(p.Sealed)
		if err != nil {
			return nil, fmt.Errorf("webhook %q: open previous secret: %w", hook.Name, err)
		}
		out = append(out, signing.Secret(old))
	}
	return out, nil
}

// abandon makes a claimable delivery Exhausted without a request.
func (d *Dispatcher) abandon(ctx context.Context, row models.Delivery, reason string) (Outcome, error) {
	res := d.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", row.ID, row.Status, row.Attempts).
		Updates(map[string]any{"status": models.StatusExhausted, "next_retry": nil, "last_error": reason, "updated_at": d.now()})
	if res.Error != nil {
		return Outcome{}, fmt.Errorf("exhaust delivery %s: %w", row.ID, res.Error)
	}
	if res.RowsAffected != 1 {
		return Outcome{}, fmt.Errorf("delivery %s changed under us: %w", row.ID, ErrNotClaimed)
	}
	d.log.Info("delivery exhausted without a request", "delivery", row.ID, "webhook", row.WebhookName, "reason", reason)
	if d.observer != nil {
		d.observer.Abandoned(row.WebhookName, models.StatusExhausted)
	}
	return Outcome{Status: models.StatusExhausted, Attempt: row.Attempts, Reason: reason}, nil
}

// recordSent writes the attempt history row and the delivery's new state
// atomically (one statement on PostgreSQL, else one transaction), fenced on
// the attempt count the claim set.
func (d *Dispatcher) recordSent(ctx context.Context, row models.Delivery, mode Mode, hook *models.Webhook, at time.Time, req delivery.Request, res delivery.Result) (Outcome, error) {
	now := d.now()
	out := Outcome{Sent: res.Class != delivery.ClassInvalid, Result: res, Attempt: row.Attempts}
	dec := decide(d.schedule, now, row.Attempts, row.MaxRetries, mode, res)
	out.Status, out.NextRetry = dec.status, dec.next
	if res.Err != nil {
		out.Reason = sanitize(res.Err.Error(), 2048)
	}
	disableReason := ""
	if dec.gone {
		disableReason = fmt.Sprintf("receiver answered 410 Gone to delivery %s at %s", row.ID, now.Format(time.RFC3339))
		out.Reason = "receiver answered 410 Gone: webhook disabled"
	}
	if !res.OK() && d.disableAfter > 0 && hook.FailingSince == nil && signal(res) == healthFailure {
		// An inline first attempt's webhook comes from the cache, which
		// does not carry health: read it (failures only).
		if h, err := d.health(ctx, hook.ID); err == nil {
			hook.FailingSince = h.FailingSince
		}
	}
	unhealthy := !res.OK() && d.disableAfter > 0 && hook.FailingSince != nil && !hook.FailingSince.After(now.Add(-d.disableAfter))
	if unhealthy && !dec.gone {
		disableReason = fmt.Sprintf("deliveries only failed since %s (health.disable_after %s)", hook.FailingSince.UTC().Format(time.RFC3339), d.disableAfter)
		out.Status, out.NextRetry = models.StatusExhausted, nil
		out.Reason = "webhook disabled: " + disableReason + "; last error: " + out.Reason
	}
	var code *int
	if res.StatusCode != 0 {
		c := res.StatusCode
		code = &c
	}
	sent := models.StringMap{}
	for k := range req.Header {
		sent[k] = req.Header.Get(k)
	}
	sent = webhook.MaskedHeaders(maskSealed(sent, hook))
	attempt := models.Attempt{
		DeliveryID:     row.ID,
		Attempt:        row.Attempts,
		At:             at,
		Method:         req.Method,
		URL:            req.URL,
		RequestHeaders: sent,
		StatusCode:     code,
		DurationMS:     res.Duration.Milliseconds(),
		Class:          string(res.Class),
		Error:          out.Reason,
		Response:       sanitize(string(res.Body), responseSnippet),
	}
	updates := map[string]any{
		"status":           out.Status,
		"next_retry":       out.NextRetry,
		"last_status_code": code,
		"last_error":       out.Reason,
		"last_response":    sanitize(string(res.Body), delivery.MaxResponseBytes),
		"method":           req.Method,
		"url":              req.URL,
		"updated_at":       now,
	}
	fromStatus := models.StatusFailed
	if mode == Sync {
		fromStatus = models.StatusExhausted
	}
	// A shutdown must not lose the outcome of a request that was sent.
	wctx := context.WithoutCancel(ctx)
	var (
		applied bool
		err     error
	)
	o := outcomeRow{
		status: out.Status, next: out.NextRetry, code: code, lastError: out.Reason,
		lastResponse: updates["last_response"].(string), method: req.Method, url: req.URL, at: now,
	}
	if d.batch != nil && disableReason == "" {
		// Concurrent attempts share one statement and its commit
		// (runRecord), which also moves the webhook's health by what the
		// database holds, whatever this worker's copy of the webhook says.
		applied, err = d.batch.record.Do(wctx, recordIn{attempt: attempt, outcome: o, fromStatus: fromStatus, fromAttempts: row.Attempts,
			webhookID: hook.ID, health: signal(res)})
		if err != nil {
			err = fmt.Errorf("record attempt %d of delivery %s: %w", row.Attempts, row.ID, err)
		}
	} else {
		err = d.db.WithContext(wctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&attempt).Error; err != nil {
				return fmt.Errorf("record attempt %d of delivery %s: %w", row.Attempts, row.ID, err)
			}
			r := tx.Model(&models.Delivery{}).
				Where("id = ? AND status = ? AND attempts = ?", row.ID, fromStatus, row.Attempts).
				Updates(updates)
			if r.Error != nil {
				return fmt.Errorf("record outcome of delivery %s: %w", row.ID, r.Error)
			}
			applied = r.RowsAffected == 1
			return d.recordHealth(tx, hook, row.ID, signal(res), now, disableReason)
		})
	}
	if err != nil {
		return out, err
	}
	if !applied {
		d.log.Warn("delivery changed while its attempt was in flight; outcome kept in history only", "delivery", row.ID)
	}
	if disableReason != "" {
		d.log.Warn("webhook disabled", "webhook", hook.Name, "delivery", row.ID, "reason", disableReason)
	}
	if d.observer != nil {
		status := ""
		if applied {
			status = out.Status
		}
		d.observer.Attempt(row.WebhookName, string(res.Class), res.Duration, status)
	}
	d.logAttempt(ctx, row, out, res, now)
	return out, nil
}

// logAttempt writes the busiest log line, one per attempt.
func (d *Dispatcher) logAttempt(ctx context.Context, row models.Delivery, out Outcome, res delivery.Result, now time.Time) {
	logging.NoCaller(ctx, d.log, slog.LevelInfo, now, "delivery attempt",
		slog.String("delivery", row.ID), slog.String("webhook", row.WebhookName), slog.String("event_id", row.EventID),
		slog.Int("attempt", row.Attempts), slog.String("status", out.Status), slog.String("class", string(res.Class)),
		slog.Int("status_code", res.StatusCode), slog.Int64("duration_ms", res.Duration.Milliseconds()), slog.String("error", out.Reason))
}

// signal is what res tells of its webhook's health, whatever the clock
// reads: a success, a failure, or nothing to count (a request that could
// not be built, a shutdown).
func signal(res delivery.Result) healthSignal {
	switch {
	case res.OK():
		return healthOK
	case res.Class != delivery.ClassInvalid && res.Class != delivery.ClassCanceled:
		return healthFailure
	}
	return healthSilent
}

// recordHealth is runRecord's health rule for one attempt, in a
// transaction: a success clears the webhook's health (failing_since,
// failures, the probe), a failure starts the failing_since clock unless it
// runs and counts one more failure. With a reason it disables the webhook
// and exhausts its other pending retries, so nothing more is sent to an
// endpoint that is gone or has only failed for health.disable_after.
// TestHealthRuleSQLMatchesGo holds the two versions of the rule together.
func (d *Dispatcher) recordHealth(tx *gorm.DB, hook *models.Webhook, deliveryID string, sig healthSignal, now time.Time, disableReason string) error {
	if disableReason != "" {
		if err := tx.Model(&models.Webhook{}).Where("id = ?", hook.ID).
			Updates(map[string]any{"enabled": false, "disabled_reason": disableReason, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("disable webhook %q: %w", hook.Name, err)
		}
		if err := tx.Model(&models.Delivery{}).
			Where("webhook_id = ? AND status = ? AND id <> ?", hook.ID, models.StatusFailed, deliveryID).
			Updates(map[string]any{"status": models.StatusExhausted, "next_retry": nil, "last_error": "webhook disabled: " + disableReason, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("exhaust pending deliveries of webhook %q: %w", hook.Name, err)
		}
	}
	var err error
	switch sig {
	case healthOK:
		err = tx.Model(&models.WebhookHealth{}).
			Where("webhook_id = ? AND (failures <> 0 OR failing_since IS NOT NULL OR probe_id IS NOT NULL)", hook.ID).
			Updates(map[string]any{"failing_since": nil, "failures": 0, "probe_id": nil, "probe_at": nil}).Error
	case healthFailure:
		err = tx.Model(&models.WebhookHealth{}).Where("webhook_id = ?", hook.ID).
			Updates(map[string]any{"failing_since": gorm.Expr("COALESCE(failing_since, ?)", now), "failures": gorm.Expr("failures + 1")}).Error
	}
	if err != nil {
		return fmt.Errorf("record health of webhook %q: %w", hook.Name, err)
	}
	return nil
}

// sanitize makes s storable as PostgreSQL text (valid UTF-8, no NUL) and cuts
// it to at most n bytes.
func sanitize(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}
