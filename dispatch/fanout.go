package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/webhook"
)

// syncPending is the reason a synchronous delivery carries until its one
// attempt is recorded: if the publisher dies in between, the row is already
// final and nothing will ever defer it.
const syncPending = "synchronous attempt did not complete (the publisher stopped before recording it)"

// Pending is a delivery record that still needs its first attempt.
type Pending struct {
	ID          string
	WebhookName string
	Queue       string
}

// FanOut creates one delivery record per enabled webhook that matches the
// event's doctype and event and whose condition holds, and returns those that
// still need their first attempt. It is idempotent: the (event, webhook)
// unique key means a second fan-out of the same event creates nothing, and
// rows a crashed earlier fan-out left unattempted are returned again so that
// their first attempt is not lost.
func (d *Dispatcher) FanOut(ctx context.Context, ev Event) ([]Pending, error) {
	pending, _, err := d.fanOut(ctx, ev, "")
	return pending, err
}

// Inline is how the worker running an event's task takes part in its
// fan-out (HandleEvent).
type Inline struct {
	// Queue is the queue the event's task runs on. One delivery whose
	// webhook uses it is sent by HandleEvent itself, instead of through a
	// webhook:deliver task of its own: one task per event instead of two in
	// the common one-webhook case. "" sends none inline.
	Queue string
	// Committed, when set, is told once the event's deliveries are
	// committed (the durable intake lets the event go).
	Committed func(ctx context.Context)
	// Enqueue queues the first attempt of a delivery not sent here. A
	// task that is already queued is not an error.
	Enqueue func(ctx context.Context, p Pending) error
}

// HandleEvent is the worker's path for an ordinary event: fan out → queue
// the first attempts of the other deliveries → make one first attempt here.
// It owns the claim of the delivery it sends: when queueing the others
// fails, it gives the claim back and returns the error, and the task's
// re-run hands that row out again as Pending.
//
// What can happen twice? Nothing more than with a task per delivery. The
// inline row is written Failed, with next_retry set to the claim's lease,
// in the same INSERT that claims it, before any request: a crash from then
// on leaves it for the sweeper once the lease ends, exactly like a crash
// after Attempt's claim. Only the fan-out whose INSERT created the row owns
// the claim (the rows carry IDs fresh to this call, so a re-run or a racing
// fan-out of the same event finds someone else's row, attempted, and sends
// nothing). A webhook on another queue is never inlined, so webhook.queue
// still keeps slow receivers apart, and workflow_transition keeps its
// synchronous path (DeliverNow).
func (d *Dispatcher) HandleEvent(ctx context.Context, ev Event, in Inline) error {
	pending, inline, err := d.fanOut(ctx, ev, in.Queue)
	if err != nil {
		return fmt.Errorf("fan out event %s: %w", ev.ID, err)
	}
	if in.Committed != nil {
		in.Committed(ctx)
	}
	for _, p := range pending {
		if err := in.Enqueue(ctx, p); err != nil {
			err = fmt.Errorf("enqueue first attempt of delivery %s: %w", p.ID, err)
			if inline != nil {
				// Due again and unattempted: the re-run queues it.
				err = errors.Join(err, d.release(inline.row, d.now()))
			}
			return err
		}
	}
	if inline == nil {
		return nil
	}
	_, err = d.send(ctx, inline.row, First, &inline.hook, inline.secrets, inline.at)
	return err
}

// errStaleHooks means rows were planned from cached webhooks that have
// changed since: nothing was written, and the event is planned again.
var errStaleHooks = errors.New("webhooks changed since they were cached")

// fanOut is FanOut, inlining one delivery on queue when queue is not empty.
// It plans from the cached webhooks first and, when those turn out stale or
// take nothing, once more from a fresh read.
func (d *Dispatcher) fanOut(ctx context.Context, ev Event, queue string) ([]Pending, *claimed, error) {
	if err := ev.Validate(); err != nil {
		return nil, nil, err
	}
	pending, inline, err := d.fanOutOnce(ctx, ev, queue, true)
	if errors.Is(err, errStaleHooks) {
		pending, inline, err = d.fanOutOnce(ctx, ev, queue, false)
	}
	return pending, inline, err
}

// fanOutOnce plans and writes the event's rows from the webhooks matching
// reads, cached when useCache. An answer from the cache is only trusted
// through the INSERT's check, so when it plans no row at all (every
// condition false) the result is errStaleHooks, to be confirmed by a fresh
// read.
func (d *Dispatcher) fanOutOnce(ctx context.Context, ev Event, queue string, useCache bool) ([]Pending, *claimed, error) {
	hooks, version, cached, err := d.matching(ctx, ev, useCache)
	if err != nil {
		return nil, nil, fmt.Errorf("load webhooks: %w", err)
	}
	if !cached {
		version = 0 // a fresh read is written as read, like an uncached fan-out
	}
	if len(hooks) == 0 {
		return nil, nil, nil
	}
	now := d.now()
	rows := make([]models.Delivery, 0, len(hooks))
	queues := make(map[string]string, len(hooks))
	ids := make([]string, 0, len(hooks))
	var inline *claimed
	for _, w := range hooks {
		row, ok := d.plan(w, ev)
		if !ok {
			continue
		}
		row.CreatedAt, row.UpdatedAt = now, now
		if row.Status == models.StatusFailed {
			// The first attempt's task normally runs long before this; if that
			// task is lost, the sweeper picks the row up here.
			next := now.Add(d.schedule.Delay(1))
			row.NextRetry = &next
			if inline == nil && queue != "" && w.Queue == queue {
				inline = d.claimAtInsert(&row, w, now)
			}
		}
		rows = append(rows, row)
		queues[w.ID] = w.Queue
		ids = append(ids, w.ID)
	}
	if len(rows) == 0 {
		if cached {
			return nil, nil, errStaleHooks
		}
		return nil, nil, nil
	}
	inserted, err := d.insert(ctx, rows, version)
	if errors.Is(err, errStaleHooks) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("create deliveries: %w", err)
	}
	wantStatus := models.StatusFailed
	if ev.Event == models.EventWorkflowTransition {
		wantStatus = models.StatusExhausted
	}
	if inserted == len(rows) {
		// Every row is ours, as planned: no need to read them back.
		pending := make([]Pending, 0, len(rows))
		for _, r := range rows {
			if inline != nil && r.ID == inline.row.ID {
				continue
			}
			if r.Status == wantStatus && (wantStatus == models.StatusFailed || r.LastError == syncPending) {
				pending = append(pending, Pending{ID: r.ID, WebhookName: r.WebhookName, Queue: queues[r.WebhookID]})
			}
		}
		return pending, inline, nil
	}
	// Some rows existed already (an earlier or a concurrent fan-out of the
	// same event): read back what exists now, ours or theirs. Served by
	// deliveries_event_webhook (event_id, webhook_id).
	var existing []models.Delivery
	if err := d.db.WithContext(ctx).
		Select("id", "webhook_id", "webhook_name", "status", "attempts").
		Where("event_id = ? AND webhook_id IN ?", ev.ID, ids).
		Find(&existing).Error; err != nil {
		return nil, nil, fmt.Errorf("read deliveries: %w", err)
	}
	ownClaim := false
	pending := make([]Pending, 0, len(existing))
	for _, r := range existing {
		if inline != nil && r.ID == inline.row.ID {
			ownClaim = true // we inserted it, so the claim is ours
			continue
		}
		if r.Attempts != 0 || r.Status != wantStatus {
			continue
		}
		if wantStatus == models.StatusExhausted && !isSyncPending(rows, r.ID) {
			continue
		}
		pending = append(pending, Pending{ID: r.ID, WebhookName: r.WebhookName, Queue: queues[r.WebhookID]})
	}
	if !ownClaim {
		inline = nil
	}
	return pending, inline, nil
}

// isSyncPending reports whether id is a synchronous row this fan-out created
// with a buildable request (an unbuildable one is Exhausted for good).
func isSyncPending(rows []models.Delivery, id string) bool {
	for _, r := range rows {
		if r.ID == id {
			return r.LastError == syncPending
		}
	}
	return false
}

// plan builds the delivery record for one webhook, or reports false when the
// webhook's condition does not hold. A request that cannot be built becomes
// an Exhausted record saying why, so the operator sees it.
func (d *Dispatcher) plan(w models.Webhook, ev Event) (models.Delivery, bool) {
	row := models.Delivery{
		ID:          d.newID(),
		WebhookID:   w.ID,
		WebhookName: w.Name,
		EventID:     ev.ID,
		DocType:     ev.DocType,
		DocName:     ev.DocName,
		DocEvent:    ev.Event,
		Method:      w.RequestMethod,
		URL:         w.RequestURL,
		Headers:     models.StringMap{},
		Payload:     []byte{},
		Status:      models.StatusFailed,
		MaxRetries:  w.MaxRetries,
	}
	sync := ev.Event == models.EventWorkflowTransition
	if sync {
		row.MaxRetries = 0
		row.Status = models.StatusExhausted
		row.LastError = syncPending
	}
	exhaust := func(reason string) (models.Delivery, bool) {
		row.Status = models.StatusExhausted
		row.NextRetry = nil
		row.LastError = reason
		return row, true
	}
	cond, err := d.conds.get(w.ConditionLanguage, w.Condition)
	if err != nil {
		return exhaust(fmt.Sprintf("condition %q does not compile: %v", w.Condition, err))
	}
	ok, err := cond.Match(ev.Doc)
	if err != nil {
		return exhaust(fmt.Sprintf("condition %q failed: %v", w.Condition, err))
	}
	if !ok {
		return models.Delivery{}, false
	}
	fields := make([]delivery.Field, len(w.Fields))
	for i, f := range w.Fields {
		fields[i] = delivery.Field{Fieldname: f.Fieldname, Key: f.Key}
	}
	if w.URLTemplate != "" {
		// Rendered once and frozen into the row: every attempt of this
		// delivery goes to the same URL (dispatch.request).
		u, err := delivery.RenderURL(w.URLTemplate, ev.Doc, w.Compat)
		if err != nil {
			return exhaust("cannot build request: " + err.Error())
		}
		frozen, err := delivery.FreezeDoc(ev.Doc)
		if err != nil {
			return exhaust("cannot build request: " + err.Error())
		}
		row.URL, row.URLDoc = u, &frozen
	}
	body, contentType, err := delivery.Build(delivery.Spec{Structure: w.RequestStructure, Template: w.BodyTemplate, Fields: fields, MaxBytes: d.maxPayload, Compat: w.Compat}, ev.Doc)
	if err != nil {
		return exhaust("cannot build request: " + err.Error())
	}
	// Sealed (credential) headers are not frozen into the row: each attempt
	// takes them from the webhook as it is then (request).
	headers := make(models.StringMap, len(w.Headers)+1)
	for k, v := range w.Headers {
		if !webhook.FromWebhook(k, v) {
			headers[k] = v
		}
	}
	if contentType != "" {
		// compat frappe has none of its own: its header rows say it.
		headers["Content-Type"] = contentType
	}
	row.Headers = headers
	row.Payload = body
	return row, true
}

// webhookColumns is what fan-out and the first attempt need of a webhook, in
// the order matching scans them.
const webhookColumns = `id, name, doc_type, doc_event, condition, request_url, request_method, request_structure,
	body_template, fields, headers, secret, previous_secrets, signature_scheme, enabled, disabled_reason,
	rate_limit, max_retries, queue, timeout_ms, follow_redirects, url_template, compat, condition_language`

// matching loads the enabled webhooks of the event's doctype and event, in
// ID order (so two fan-outs of one event insert in the same order). Served
// by webhooks_match (doc_type, doc_event) WHERE enabled. It scans by hand:
// this runs once per event, and GORM's reflection was a tenth of the
// worker's CPU. On PostgreSQL most events are answered from hookCache
// (useCache), whose answer the INSERT checks, and the others share one
// SELECT between concurrent events (runMatch). cached reports an answer from
// the cache, read at version.
func (d *Dispatcher) matching(ctx context.Context, ev Event, useCache bool) (hooks []models.Webhook, version int64, cached bool, err error) {
	if d.batch == nil {
		rows, err := d.db.WithContext(ctx).Raw("SELECT "+webhookColumns+
			" FROM webhooks WHERE doc_type = ? AND doc_event = ? AND enabled = ? ORDER BY id", ev.DocType, ev.Event, true).Rows()
		if err != nil {
			return nil, 0, false, err
		}
		defer rows.Close()
		for rows.Next() {
			var w models.Webhook
			if err := scanWebhook(rows, &w); err != nil {
				return nil, 0, false, err
			}
			hooks = append(hooks, w)
		}
		return hooks, 0, false, rows.Err()
	}
	key := matchKey{ev.DocType, ev.Event}
	if useCache {
		if hooks, version, ok := d.hooks.get(key); ok {
			return hooks, version, true, nil
		}
	}
	r, err := d.batch.match.Do(ctx, key)
	if err != nil {
		return nil, 0, false, err
	}
	d.hooks.put(key, r.hooks, r.version)
	return r.hooks, r.version, false, nil
}

// scanWebhook reads one row of webhookColumns, after the columns of first.
func scanWebhook(rows *sql.Rows, w *models.Webhook, first ...any) error {
	return rows.Scan(append(first, &w.ID, &w.Name, &w.DocType, &w.DocEvent, &w.Condition, &w.RequestURL, &w.RequestMethod,
		&w.RequestStructure, &w.BodyTemplate, &w.Fields, &w.Headers, &w.Secret, &w.PreviousSecrets, &w.SignatureScheme,
		&w.Enabled, &w.DisabledReason, &w.RateLimit, &w.MaxRetries, &w.Queue, &w.TimeoutMS,
		&w.FollowRedirects, &w.URLTemplate, &w.Compat, &w.ConditionLanguage)...)
}

// deliveryColumns are the columns fan-out writes, in insert's order.
const deliveryColumns = `id, webhook_id, webhook_name, event_id, doc_type, doc_name, doc_event, method, url, headers,
	payload, status, attempts, max_retries, next_retry, last_error, created_at, updated_at, url_doc`

// insertBatch keeps one INSERT's parameters (19 per row) well under
// PostgreSQL's 65,535.
const insertBatch = 200

// insert writes rows with INSERT … ON CONFLICT (event_id, webhook_id) DO
// NOTHING, one statement per batch, and reports how many it created. A row
// that already exists (an earlier fan-out of the same event) is left alone.
// Rows planned from webhooks cached at version (not 0) are written only
// while webhooks_version still reads it, else none is and the error is
// errStaleHooks.
func (d *Dispatcher) insert(ctx context.Context, rows []models.Delivery, version int64) (int, error) {
	if d.batch != nil {
		// Concurrent fan-outs share one INSERT and its commit (runInsert);
		// the rows are committed before this returns, so before any request.
		r, err := d.batch.insert.Do(ctx, insertSet{rows: rows, version: version})
		if err != nil {
			return 0, err
		}
		d.hooks.saw(r.version)
		if version != 0 && r.version != version {
			return 0, errStaleHooks
		}
		return r.created, nil
	}
	inserted := 0
	for start := 0; start < len(rows); start += insertBatch {
		batch := rows[start:min(start+insertBatch, len(rows))]
		var sql strings.Builder
		sql.WriteString("INSERT INTO deliveries (" + deliveryColumns + ") VALUES ")
		args := make([]any, 0, 19*len(batch))
		for i, r := range batch {
			if i > 0 {
				sql.WriteString(", ")
			}
			sql.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			headers, err := r.Headers.Value()
			if err != nil {
				return inserted, err
			}
			args = append(args, r.ID, r.WebhookID, r.WebhookName, r.EventID, r.DocType, r.DocName, r.DocEvent, r.Method, r.URL,
				headers, r.Payload, r.Status, r.Attempts, r.MaxRetries, r.NextRetry, r.LastError, r.CreatedAt, r.UpdatedAt, r.URLDoc)
		}
		sql.WriteString(" ON CONFLICT (event_id, webhook_id) DO NOTHING")
		res := d.db.WithContext(ctx).Exec(sql.String(), args...)
		if res.Error != nil {
			return inserted, res.Error
		}
		inserted += int(res.RowsAffected)
	}
	return inserted, nil
}

// conditionCache keeps compiled conditions by source text; webhooks share
// few distinct conditions, and compiling one per event would dominate.
type conditionCache struct {
	mu sync.Mutex
	m  map[string]*delivery.Condition
}

func newConditionCache() *conditionCache {
	return &conditionCache{m: make(map[string]*delivery.Condition)}
}

func (c *conditionCache) get(language, src string) (*delivery.Condition, error) {
	key := src
	if language == delivery.LanguagePython {
		key = "python\x00" + src // expr sources are keyed as they were
	}
	c.mu.Lock()
	cond, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return cond, nil
	}
	cond, err := delivery.CompileConditionIn(language, src)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= 4096 {
		clear(c.m)
	}
	c.m[key] = cond
	c.mu.Unlock()
	return cond, nil
}
