package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/logging"
	"github.com/homingdev/homing/models"
)

// Mode says which state an attempt may claim a delivery from: First,
// Retry or Sync (storage.Mode).
type Mode = storage.Mode

const (
	// First is the first attempt run by the task fan-out enqueued: the row
	// is Failed with no attempt made yet.
	First = storage.First
	// Retry is a retry enqueued by the sweeper: the row is Failed and due.
	Retry = storage.Retry
	// Sync is workflow_transition's one attempt in the publisher: the row is
	// already final (Exhausted) and becomes Delivered only on success.
	Sync = storage.Sync
)

// responseSnippet is how much of a response the attempt history keeps; the
// delivery row keeps the last response up to send.MaxResponseBytes.
const responseSnippet = 1 << 10

// Outcome is what one attempt did.
type Outcome struct {
	// Status is the delivery's status after the attempt.
	Status string
	// Sent is false when no request was made (webhook disabled or deleted).
	Sent   bool
	Result send.Result
	// Attempt is the attempt number just made.
	Attempt int
	// NextRetry is set when another attempt is scheduled.
	NextRetry *time.Time
	// Reason is the error recorded on the delivery, if any.
	Reason string
	// Postponed is set when no request was made because the webhook's
	// rate_limit was spent, or its tenant had its share of requests in
	// flight: the delivery is due again at NextRetry, with no attempt
	// counted.
	Postponed bool
	// freed is the tenant whose share of requests this attempt's request
	// held and gave back ("" for none, or the default tenant): its
	// parked deliveries may take the place (follow).
	freed string
	// next is the delivery of the same document this attempt's final
	// outcome woke (ordered delivery: storage.Recorded.Woken), due now,
	// for the goroutine to send next (follow); nil when none.
	next *Pending
}

// Observer is told of each outcome the dispatcher has committed, so that
// metrics count what the database holds, not what was tried. It runs on the
// attempt's goroutine: implementations are fast and safe for concurrent use.
type Observer interface {
	// Attempt reports one request of webhook's delivery by its
	// send.Class ("2xx", "5xx", "timeout" …), how long it took, and the
	// status it left the delivery in: Delivered, Failed (a retry is
	// scheduled) or Exhausted, with why (models.Reasons). The status is
	// empty when the delivery changed while the request was in flight and
	// kept the state it was given.
	Attempt(tenant, webhook, class string, d time.Duration, status, reason string)
	// Deliveries reports n of webhook's deliveries moved to status for
	// reason without an attempt of their own: made Exhausted at fan-out
	// (unbuildable), or because their webhook was disabled or deleted.
	Deliveries(tenant, webhook, status, reason string, n int)
	// Postponed reports an attempt that was not made and left its delivery
	// due later, with no attempt counted: "rate_limit" (its webhook's
	// rate_limit was spent), "tenant_share" (its tenant had its share of
	// the worker's requests in flight), "held" (its webhook is failing and
	// this retry is not the probe) or "tenant_disabled".
	Postponed(reason string)
}

// LatencyObserver is an Observer that is also told the latency users feel
// (the metrics of a worker; not the handoff of a process without them).
type LatencyObserver interface {
	// Latency reports a delivery's final outcome (Delivered or Exhausted),
	// d after its event's acceptance, and whether it took more than one
	// attempt.
	Latency(tenant, webhook, status string, retried bool, d time.Duration)
	// FirstAttempt reports a delivery's first attempt, d after its event's
	// acceptance.
	FirstAttempt(tenant, webhook string, d time.Duration)
}

// acceptedAt is when row's event was accepted: its accepted_at, or its
// created_at (the fan-out) for a row of a task that did not carry it.
func acceptedAt(row models.Delivery) time.Time {
	if row.AcceptedAt != nil {
		return *row.AcceptedAt
	}
	return row.CreatedAt
}

// SetObserver sets the observer Config.Observer would have set, for a
// process that builds its metrics after the dispatcher (the worker). Call it
// before the dispatcher is in use; nil means none.
func (d *Dispatcher) SetObserver(o Observer) { d.observer = o }

// Deliveries tells the observer, if any, of n of webhook's deliveries moved
// to status for reason without an attempt. Every such path of the
// dispatcher calls it, and so does the webhook service when disabling or
// deleting exhausts retries (webhook.Observer): a process that counts (a
// worker with metrics) counts
// them all, and the others hand them off to one that does (app.Open makes
// a handoff.Handoff every dispatcher's observer until a worker's metrics
// replace it).
func (d *Dispatcher) Deliveries(tenant, webhook, status, reason string, n int) {
	if d.observer != nil && n > 0 {
		d.observer.Deliveries(tenant, webhook, status, reason, n)
	}
}

// Attempt makes one attempt of delivery id: claim → decide → send →
// record. Receiver failures are recorded, not returned: the error is
// non-nil only when the attempt could not be claimed (ErrNotClaimed), when
// the database failed, or when ctx was cancelled mid-request (the claim is
// then released so the task can run again).
//
// Once its request has ended, the goroutine goes on with what the attempt
// left for it (follow): the next version of an ordered document its
// outcome woke, and the deliveries of the same tenant that its share
// parked.
func (d *Dispatcher) Attempt(ctx context.Context, id string, mode Mode) (Outcome, error) {
	out, err := d.attempt(ctx, id, mode, true)
	d.follow(ctx, out)
	return out, err
}

// attempt is Attempt; again lets a claim the ordering rule refused claim
// once more when the row turns out no longer held (hold).
func (d *Dispatcher) attempt(ctx context.Context, id string, mode Mode, again bool) (Outcome, error) {
	now := d.now()
	c, err := d.store.Claim(ctx, storage.ClaimIn{ID: id, Mode: mode, Now: now})
	if err != nil {
		return Outcome{}, err
	}
	if !c.Claimed {
		return d.refused(ctx, c, id, mode, now, again)
	}
	// A secret that cannot be opened is this worker's configuration
	// problem (a wrong secrets.key), not the receiver's: fail the task, and
	// give the row back as it was.
	own := claimed{row: c.Row, prevNext: c.PrevNext, hook: *c.Hook, at: now}
	if own.secrets, err = webhook.LiveSecrets(d.box, c.Hook, now); err != nil {
		return Outcome{}, d.notSent(ctx, own, ErrSecretUnavailable, err)
	}
	return d.send(ctx, own, mode)
}

// send makes the request of a claimed attempt and records its outcome. A
// request interrupted by the caller's shutdown releases the claim instead,
// and so does one that cannot be built (notSent), and one whose lease has
// too little left to cover it (checkLease).
//
// What can happen twice? Two claims of one delivery can both be live only
// when the first outlived its lease (the sweeper then finds the row due
// and a retry claims it). No request leaves here on a claim whose lease
// could end before the request and its record are done, so of two such
// claims at most one sends.
func (d *Dispatcher) send(ctx context.Context, c claimed, mode Mode) (out Outcome, err error) {
	ctx, span := startAttempt(ctx, c, mode)
	defer func() { endAttempt(span, out, err) }()
	hook := &c.hook
	if mode != Sync {
		// workflow_transition is never deferred, so never bounded.
		if !d.share.take(ctx, c.row.Tenant, shareTakeWait) {
			return d.overShare(ctx, c)
		}
		defer func() {
			d.share.give(c.row.Tenant)
			if d.share.bounded(c.row.Tenant) {
				out.freed = c.row.Tenant
			}
		}()
	}
	if mode != Sync && hook.RateLimit > 0 && d.limiter != nil {
		if out, done, err := d.limit(ctx, c.row, hook, c.at); done {
			return out, err
		}
	}
	if len(c.row.Payload) == 0 && CarriesBody(hook.RequestMethod) {
		return d.noPayload(ctx, c, mode)
	}
	req, why, err := d.request(c.row, hook, c.secrets, c.at)
	if err != nil {
		return Outcome{}, d.notSent(ctx, c, why, err)
	}
	if mode != Sync {
		if err := d.checkLease(ctx, c, cmp.Or(req.Timeout, send.DefaultTimeout)); err != nil {
			return Outcome{}, err
		}
		if err := d.checkResumeDeadline(ctx, c, cmp.Or(req.Timeout, send.DefaultTimeout)); err != nil {
			return Outcome{}, err
		}
	}
	res := d.sender.Send(ctx, req)
	if errors.Is(res.Err, context.Canceled) && mode != Sync {
		now := d.now()
		if rerr := d.release(ctx, c.row, &now); rerr != nil {
			return Outcome{}, errors.Join(res.Err, rerr)
		}
		return Outcome{}, fmt.Errorf("attempt of delivery %s interrupted: %w", c.row.ID, res.Err)
	}
	return d.recordSent(ctx, c.row, mode, hook, c.at, req, res)
}

// checkLease lets a claimed attempt send only while its lease covers the
// request's timeout and RecordMargin (leaseAllows). Otherwise it gives the
// claim back, due now and fenced on the attempt count the claim set (a
// retry that claimed the row since is left as it is), logs why, and
// returns ErrLeaseEnded: the sweeper takes the row at its next tick.
func (d *Dispatcher) checkLease(ctx context.Context, c claimed, timeout time.Duration) error {
	now := d.now()
	if leaseAllows(c.row.NextRetry, now, timeout) {
		return nil
	}
	err := fmt.Errorf("delivery %s: claimed at %s, lease ends %s, request timeout %s: %w",
		c.row.ID, c.at.Format(time.RFC3339Nano), c.row.NextRetry.Format(time.RFC3339Nano), timeout, ErrLeaseEnded)
	if rerr := d.release(ctx, c.row, &now); rerr != nil {
		return errors.Join(err, rerr)
	}
	d.log.Warn("attempt not sent: too little of its claim's lease is left (the sweeper sends it, or has)",
		"delivery", c.row.ID, "webhook", c.row.WebhookName, "event_id", c.row.EventID, "attempt", c.row.Attempts,
		"claimed_at", c.at.Format(time.RFC3339Nano), "lease_ends", c.row.NextRetry.Format(time.RFC3339Nano),
		"timeout", timeout.String(), "record_margin", RecordMargin.String())
	return err
}

// ErrNoPayload is the error recorded on a delivery that has no payload
// while its webhook's method carries a body: its body was never built, and
// sending it would deliver nothing and record success.
var ErrNoPayload = errors.New("delivery has no payload")

// noPayload records a claimed attempt of a delivery with no payload as
// made and invalid, without a request: the delivery is Exhausted with the
// reason in its history and last_error, and counted like any attempt. A
// retry (recovery) builds such a delivery from the document it kept first.
func (d *Dispatcher) noPayload(ctx context.Context, c claimed, mode Mode) (Outcome, error) {
	err := fmt.Errorf("not sent: %w, and a %s request must carry a body (fix the webhook's definition, then homing delivery retry %s builds the body from the document the delivery kept)",
		ErrNoPayload, c.hook.RequestMethod, c.row.ID)
	d.log.Warn("delivery not sent: no payload", "delivery", c.row.ID, "webhook", c.row.WebhookName)
	req := send.Request{Method: c.hook.RequestMethod, URL: c.row.URL, Header: http.Header{}}
	return d.recordSent(ctx, c.row, mode, &c.hook, c.at, req, send.Result{Class: send.ClassInvalid, Err: err})
}

// request builds the HTTP request of this attempt: the frozen payload and
// headers, the webhook's current URL (or, for a webhook with a URL
// template, the template rendered with the document the delivery keeps),
// method, redirect limit and credential (sealed) headers, fresh signatures.
// When it cannot, why says whose the problem is: this worker's secrets.key
// (ErrSecretUnavailable) or the webhook's url_template
// (ErrRequestUnbuildable).
func (d *Dispatcher) request(row models.Delivery, hook *models.Webhook, secrets []signing.Secret, now time.Time) (req send.Request, why, err error) {
	h := make(http.Header, len(row.Headers)+4)
	for k, v := range row.Headers {
		h.Set(k, v)
	}
	secret, err := webhook.Sign(d.box, hook, h, secrets, row.ID, now, row.Payload)
	if err != nil {
		return req, ErrSecretUnavailable, err
	}
	url, err := d.url(row, hook, now)
	if err != nil {
		return req, ErrRequestUnbuildable, fmt.Errorf("webhook %q: %w", hook.Name, err)
	}
	return send.Request{
		Method:          hook.RequestMethod,
		URL:             url,
		Header:          h,
		Body:            row.Payload,
		Timeout:         hook.Timeout(),
		FollowRedirects: hook.FollowRedirects,
		Secret:          secret,
	}, nil, nil
}

// url is where this attempt goes: the webhook's URL or, for a webhook with
// a url_template, its current template rendered with the document the
// delivery keeps (a template fixed since reaches the retries still due, and
// a resend). A row without the document (made before it was kept) goes to
// the URL rendered at fan-out.
func (d *Dispatcher) url(row models.Delivery, hook *models.Webhook, now time.Time) (string, error) {
	switch {
	case hook.URLTemplate == "" || row.URL == "":
		return hook.RequestURL, nil
	case row.URLDoc != nil:
		return template.RenderFrozenURL(hook.URLTemplate, *row.URLDoc, hook.Compat, now, d.renderTime)
	}
	return row.URL, nil
}

// recordSent decides the attempt's outcome and has the store write it: the
// history row, the delivery's new state fenced on the attempt count the
// claim set, and the webhook's health (disabling it when it is gone or has
// only failed for health.disable_after), atomically.
func (d *Dispatcher) recordSent(ctx context.Context, row models.Delivery, mode Mode, hook *models.Webhook, at time.Time, req send.Request, res send.Result) (Outcome, error) {
	now := d.now()
	out := Outcome{Sent: res.Class != send.ClassInvalid, Result: res, Attempt: row.Attempts}
	dec := decide(d.schedule, now, row.Attempts, row.MaxRetries, mode, res)
	out.Status, out.NextRetry = dec.status, dec.next
	reason := dec.reason
	if res.Err != nil {
		out.Reason = sanitize(res.Err.Error(), 2048)
	}
	disableReason := ""
	if dec.gone {
		disableReason = fmt.Sprintf("receiver answered 410 Gone to delivery %s at %s", row.ID, now.Format(time.RFC3339))
		out.Reason = "receiver answered 410 Gone: webhook disabled"
	}
	if !res.OK() && d.disableAfter > 0 && hook.FailingSince == nil && signal(res) == storage.HealthFailure {
		// An inline first attempt's webhook comes from fan-out's read,
		// which does not carry health: read it (failures only).
		if h, err := d.store.Health(ctx, hook.ID); err == nil {
			hook.FailingSince = h.FailingSince
		}
	}
	unhealthy := !res.OK() && d.disableAfter > 0 && hook.FailingSince != nil && !hook.FailingSince.After(now.Add(-d.disableAfter))
	if unhealthy && !dec.gone {
		disableReason = fmt.Sprintf("deliveries only failed since %s (health.disable_after %s)", hook.FailingSince.UTC().Format(time.RFC3339), d.disableAfter)
		out.Status, out.NextRetry = models.StatusExhausted, nil
		out.Reason = "webhook disabled: " + disableReason + "; last error: " + out.Reason
		reason = models.ReasonUnhealthy
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
		Tenant:         row.Tenant,
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
	fromStatus := models.StatusFailed
	if mode == Sync {
		fromStatus = models.StatusExhausted
	}
	// A shutdown must not lose the outcome of a request that was sent.
	rec, err := d.store.Record(context.WithoutCancel(ctx), storage.Outcome{
		Attempt:      attempt,
		FromStatus:   fromStatus,
		Status:       out.Status,
		NextRetry:    out.NextRetry,
		LastError:    out.Reason,
		LastResponse: sanitize(string(res.Body), send.MaxResponseBytes),
		UpdatedAt:    now,
		WebhookID:    hook.ID,
		Health:       signal(res),
		Disable:      disableReason,
		Order:        storage.KeyOf(row),
	})
	if err != nil {
		return out, err
	}
	if key := storage.KeyOf(row); key != nil && rec.Applied && (out.Status == models.StatusDelivered || out.Status == models.StatusExhausted) {
		woken := rec.Woken
		if woken == "" {
			// Read again after the commit: a later row fanned out while
			// the outcome's statement ran is seen now (storage.Store.Wake).
			var werr error
			if woken, werr = d.store.Wake(context.WithoutCancel(ctx), *key, row.ID, now); werr != nil {
				d.log.Warn("next delivery of a document not woken; the sweep's recheck sends it", "after", row.ID, "error", werr.Error())
			}
		}
		if woken != "" {
			out.next = &Pending{ID: woken, WebhookName: row.WebhookName, Queue: hook.Queue}
		}
	}
	// A failure may have made the webhook failing, and a success ended
	// its episode: publish what changed (once: storage.Store.Announce). A
	// success whose claim read no failing_since (an inline first attempt)
	// is announced by the next sweep instead, which keeps the healthy
	// path free of the read.
	if sig := signal(res); sig == storage.HealthFailure || (sig == storage.HealthOK && hook.FailingSince != nil) {
		if err := d.store.Announce(context.WithoutCancel(ctx), hook.ID, out.Reason, now); err != nil {
			d.log.Warn("operational event not published; the next sweep publishes it", "webhook", hook.Name, "error", err.Error())
		}
	}
	applied := rec.Applied
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
		d.observer.Attempt(row.Tenant, row.WebhookName, string(res.Class), res.Duration, status, reason)
		if lo, ok := d.observer.(LatencyObserver); ok {
			if row.Attempts == 1 {
				lo.FirstAttempt(row.Tenant, row.WebhookName, max(at.Sub(acceptedAt(row)), 0))
			}
			if status == models.StatusDelivered || status == models.StatusExhausted {
				lo.Latency(row.Tenant, row.WebhookName, status, row.Attempts > 1, max(now.Sub(acceptedAt(row)), 0))
			}
		}
	}
	// The webhook's other pending deliveries, exhausted by disabling it.
	d.Deliveries(row.Tenant, row.WebhookName, models.StatusExhausted, reason, int(rec.Exhausted))
	d.logAttempt(ctx, row, out, res, now)
	return out, nil
}

// wakeNext queues the first attempt of p, the delivery of a document that
// the final outcome of the one before it released (storage.Recorded.Woken),
// when the goroutine that recorded it does not send it itself (follow): it
// is due now in the database already, so a lost enqueue costs a sweep's
// interval, not the delivery.
func (d *Dispatcher) wakeNext(ctx context.Context, p Pending) {
	if d.wake == nil {
		return
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	if err := d.wake(ctx, p); err != nil {
		d.log.Warn("next delivery of a document not queued; the sweep sends it", "delivery", p.ID, "error", err.Error())
	}
}

// logAttempt writes the busiest log line, one per attempt.
func (d *Dispatcher) logAttempt(ctx context.Context, row models.Delivery, out Outcome, res send.Result, now time.Time) {
	logging.NoCaller(ctx, d.log, slog.LevelInfo, now, "delivery attempt",
		slog.String("delivery", row.ID), slog.String("webhook", row.WebhookName), slog.String("event_id", row.EventID),
		slog.Int("attempt", row.Attempts), slog.String("status", out.Status), slog.String("class", string(res.Class)),
		slog.Int("status_code", res.StatusCode), slog.Int64("duration_ms", res.Duration.Milliseconds()), slog.String("error", out.Reason))
}

// signal is what res tells of its webhook's health, whatever the clock
// reads: a success, a failure, or nothing to count (a request that could
// not be built, a shutdown).
func signal(res send.Result) storage.HealthSignal {
	switch {
	case res.OK():
		return storage.HealthOK
	case res.Class != send.ClassInvalid && res.Class != send.ClassCanceled:
		return storage.HealthFailure
	}
	return storage.HealthSilent
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
