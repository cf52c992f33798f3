package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/condition"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/models"
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
//
// A definition stopped by its time limit is not Exhausted here: FanOut has
// no re-runs to count (its callers publish synchronously and answer the
// error), so the stop fails the call like the heap ceiling does.
func (d *Dispatcher) FanOut(ctx context.Context, ev Event) ([]Pending, error) {
	pending, _, _, _, err := d.fanOut(ctx, ev, Inline{})
	return pending, err
}

// Inline is how the worker running an event's task takes part in its
// fan-out (HandleEvent).
type Inline struct {
	// Queue is the queue the event's task runs on. The deliveries whose
	// webhook uses it (up to MaxInlinePerEvent) are sent by HandleEvent
	// itself, instead of through a webhook:deliver task each: one task per
	// event. "" sends none inline.
	Queue string
	// Outbox says the event came through the durable intake: the store
	// deletes its outbox row in the commit that writes its deliveries
	// when it can (storage.EventKey.Outbox).
	Outbox bool
	// Committed, when set, is told once the event's deliveries are
	// committed, unless the store released the event's outbox row in that
	// commit (the durable intake then lets the event go itself).
	Committed func(ctx context.Context)
	// Enqueue queues the first attempt of a delivery not sent here. A
	// task that is already queued is not an error. It may be called from
	// several goroutines at once.
	Enqueue func(ctx context.Context, p Pending) error
	// Retries is how many times the event's task ran before this run
	// (asynq.GetRetryCount). From SlowFinalRetries on, a definition
	// stopped by its time limit is Exhausted for this event (onStop).
	Retries int
}

// HandleEvent is the worker's path for an ordinary event: fan out → queue
// the first attempts of the deliveries not sent here → make the first
// attempt of every delivery claimed at insert, concurrently. A delivery is
// claimed at insert when its webhook uses the event task's queue, up to
// MaxInlinePerEvent per event; the others are queued as before. Each
// inline request waits for one of the process's inline slots
// (Config.InlineRequests, worker.concurrency in the worker), so requests
// in flight stay bounded by twice worker.concurrency: asynq's tasks (each
// at most one request) and the inline slots. A slow receiver holds up its
// own request and the event task's return, never the others' requests.
//
// HandleEvent owns the claims of the deliveries it sends: when queueing
// the others fails, it gives every claim back unsent and returns the
// error, and the task's re-run hands those rows out again as Pending.
//
// What can happen twice? Nothing more than with a task per delivery, and
// nothing more than with one inline attempt: each inline row keeps the
// rules that one had. The requests go out only after Committed and the
// other enqueues, which may take long (the outbox release waits on a
// relay's row locks): each send checks its own lease first, and a claim
// whose lease can no longer cover its request is given back and queued
// instead (ErrLeaseEnded). Each inline row is written Failed, with
// next_retry set to its claim's lease, in the same INSERT that claims it,
// before any request: a crash from then on leaves every one of them for
// the sweeper once its lease ends, exactly like a crash after Attempt's
// claim. Only the fan-out whose INSERT created a row owns its claim (the
// rows carry IDs fresh to this call, so a re-run or a racing fan-out of
// the same event finds someone else's rows, attempted, and sends none of
// them). One send's failure (a shutdown, the database) gives back or
// leaves only its own row: the others are sent and recorded each on its
// own, and the re-run that the error causes finds them attempted. A
// webhook on another queue is never inlined, so webhook.queue still keeps
// slow receivers apart, and workflow_transition keeps its synchronous
// path (DeliverNow).
func (d *Dispatcher) HandleEvent(ctx context.Context, ev Event, in Inline) error {
	ctx, span := startFanOut(ctx, ev)
	defer span.End()
	pending, inline, skipped, released, err := d.fanOut(ctx, ev, in)
	if err != nil {
		return fmt.Errorf("fan out event %s: %w", ev.ID, err)
	}
	if in.Committed != nil && !released {
		in.Committed(ctx)
	}
	d.wakeSkipped(ctx, ev, skipped, in.Enqueue)
	for _, p := range pending {
		if err := in.Enqueue(ctx, p); err != nil {
			err = fmt.Errorf("enqueue first attempt of delivery %s: %w", p.ID, err)
			// Due again and unattempted: the re-run queues them.
			return errors.Join(err, d.giveBack(ctx, inline))
		}
	}
	return d.sendInline(ctx, inline, in.Queue, in.Enqueue)
}

// fanOut is FanOut, claiming at insert the deliveries on in.Queue that
// HandleEvent sends itself when in.Queue is not empty, and releasing the
// event's outbox row with them when in.Outbox is set (released says it was).
func (d *Dispatcher) fanOut(ctx context.Context, ev Event, in Inline) (pending []Pending, inline []*claimed, skipped []models.Webhook, released bool, err error) {
	if err := ev.Validate(); err != nil {
		return nil, nil, nil, false, err
	}
	p := &eventPlan{d: d, ev: ev, queue: in.Queue, retries: in.Retries, trace: keptTrace(ctx, ev), accepted: acceptedOf(ev)}
	key := storage.EventKey{Tenant: ev.Tenant, DocType: ev.DocType, Event: ev.Event}
	if in.Outbox {
		key.Outbox = ev.ID
	}
	written, err := d.store.FanOut(ctx, key, p.rows)
	if err != nil {
		return nil, nil, nil, false, err
	}
	if p.stopped != nil {
		// No verdict on the webhook: nothing was written, and the
		// event's task fails to run again.
		d.logStopped(ev, p.stopped, in.Retries)
		return nil, nil, nil, false, fmt.Errorf("event %s: %w", ev.ID, p.stopped)
	}
	// The rows the ordering rule held at insert: those it no longer holds
	// now that they are committed are queued; the others are woken in turn.
	free, err := d.store.Unblocked(ctx, written.Blocked)
	if err != nil {
		return nil, nil, nil, false, err
	}
	pending, inline = p.pending(written, free)
	p.countUnbuilt(written)
	return pending, inline, p.skipped, written.Released, nil
}

// wakeSkipped wakes, for each ordered webhook the event made no ordered
// delivery of (eventPlan.skipped), the next delivery of the event's
// document after the event's place (Store.WakeAfterEvent), and queues its
// first attempt: while the event waited in the outbox it held them, and
// its outbox row is released by now (HandleEvent calls it after
// Committed). A wake is a hint, as every wake: the woken row's claim
// checks the whole rule, and a wake not made leaves the row to the sweep's
// recheck (storage.OrderRecheck), so a failure is logged, not returned.
// Only an event with a place of its own (through the outbox) can have
// held anything.
func (d *Dispatcher) wakeSkipped(ctx context.Context, ev Event, skipped []models.Webhook, enqueue func(context.Context, Pending) error) {
	if ev.AcceptSeq <= 0 {
		return
	}
	for _, w := range skipped {
		k := storage.OrderKey{Tenant: models.TenantOr(w.Tenant), WebhookID: w.ID, DocType: ev.DocType, DocName: ev.DocName}
		id, err := d.store.WakeAfterEvent(ctx, k, ev.AcceptSeq, d.now())
		if err == nil && id != "" && enqueue != nil {
			err = enqueue(ctx, Pending{ID: id, WebhookName: w.Name, Queue: w.Queue})
		}
		if err != nil {
			d.log.Warn("the next delivery of a document an event made none for was not woken; the sweep's recheck sends it",
				"webhook", w.Name, "doc_type", ev.DocType, "doc_name", ev.DocName, "event_id", ev.ID, "error", err.Error())
		}
	}
}

// eventPlan plans one event's rows for the store's FanOut, which may ask
// more than once (storage.Plan): each call starts over with fresh IDs, and
// what it keeps (each webhook's queue, the inline claims) is the last
// call's, the one written.
type eventPlan struct {
	d      *Dispatcher
	ev     Event
	queue  string
	queues map[string]string
	// inline are the rows claimed at insert, at most MaxInlinePerEvent.
	inline []*claimed
	// retries is the event task's retry count (Inline.Retries).
	retries int
	// stopped is the error of an evaluation stopped for no fault of its
	// webhook's (onStop: the heap ceiling, the time limit before
	// SlowFinalRetries): the plan is then empty.
	stopped error
	// frozen is the event's document as the rows keep it (url_doc),
	// made once for all its rows that keep it (freeze).
	frozen    *string
	frozenErr error
	// trace is the trace context every row keeps (nil: none), one string
	// for all of them.
	trace *string
	// accepted is when the event was accepted, as every row keeps it (nil:
	// not known), one value for all of them.
	accepted *time.Time
	// skipped are the ordered webhooks the event makes no ordered
	// delivery of: its condition is false for them, or their row is
	// Exhausted at fan-out (wakeSkipped).
	skipped []models.Webhook
}

// acceptedOf is ev's acceptance time as a row keeps it: nil when the task
// did not carry one.
func acceptedOf(ev Event) *time.Time {
	if ev.AcceptedAt.IsZero() {
		return nil
	}
	at := ev.AcceptedAt.UTC().Truncate(time.Microsecond)
	return &at
}

// freeze is the event's document as a row keeps it, frozen on first use.
func (p *eventPlan) freeze() (*string, error) {
	if p.frozen == nil && p.frozenErr == nil {
		f, err := template.FreezeDoc(p.ev.Doc)
		p.frozen, p.frozenErr = &f, err
	}
	return p.frozen, p.frozenErr
}

// rows is the event's row for each webhook whose condition holds (plan).
// A Failed row is due for the sweeper at the schedule's first delay, and
// those on the inline queue are claimed at insert, up to
// MaxInlinePerEvent.
func (p *eventPlan) rows(hooks []models.Webhook) []models.Delivery {
	now := p.d.now()
	rows := make([]models.Delivery, 0, len(hooks))
	p.queues, p.inline, p.stopped, p.skipped = make(map[string]string, len(hooks)), p.inline[:0], nil, p.skipped[:0]
	for _, w := range hooks {
		row, ok, err := p.d.plan(w, p.ev, now, p.retries, p.freeze)
		if err != nil {
			p.stopped = err
			return nil
		}
		if w.Ordered() && (!ok || row.Status != models.StatusFailed) {
			p.skipped = append(p.skipped, w)
		}
		if !ok {
			continue
		}
		row.CreatedAt, row.UpdatedAt, row.Tenant, row.TraceContext, row.AcceptedAt = now, now, w.Tenant, p.trace, p.accepted
		if w.Ordered() && row.Status == models.StatusFailed {
			// Its event's place in the acceptance order; 0 has the store
			// draw one (an event queued straight into Redis).
			seq := p.ev.AcceptSeq
			row.AcceptSeq = &seq
		}
		if row.Status == models.StatusFailed {
			// The first attempt's task normally runs long before this; if
			// that task is lost, the sweeper picks the row up here.
			next := now.Add(p.d.schedule.Delay(1))
			row.NextRetry = &next
			if p.queue != "" && w.Queue == p.queue && len(p.inline) < MaxInlinePerEvent {
				if c := p.d.claimAtInsert(&row, w, now); c != nil {
					p.inline = append(p.inline, c)
				}
			}
		}
		rows = append(rows, row)
		p.queues[w.ID] = w.Queue
	}
	return rows
}

// pending is what the written rows leave to do: the deliveries that still
// need their first attempt, and the inline claims whose rows are ours.
// free are the rows the ordering rule held at insert (written.Blocked)
// that it no longer holds: queued like the others; the rest of
// written.Blocked wait for their wake.
func (p *eventPlan) pending(written storage.Written, free []string) ([]Pending, []*claimed) {
	if len(written.Rows) == 0 {
		return nil, nil
	}
	wantStatus := models.StatusFailed
	if p.ev.Event == models.EventWorkflowTransition {
		wantStatus = models.StatusExhausted
	}
	claimedIDs := make(map[string]bool, len(p.inline))
	for _, c := range p.inline {
		claimedIDs[c.row.ID] = true
	}
	// A claim the store held (its tenant is disabled) is not ours to send,
	// nor a first attempt to queue: the row is due at once, for the sweep
	// once the tenant is enabled again.
	held := make(map[string]bool, len(written.Held)+len(written.Blocked))
	for _, id := range written.Held {
		held[id] = true
	}
	// A claim the ordering rule held is not ours to send either; its
	// first attempt is queued only if the rule no longer holds it (freed),
	// else it waits for its wake (waiting).
	freed := make(map[string]bool, len(free))
	for _, id := range free {
		freed[id] = true
	}
	waiting := make(map[string]bool, len(written.Blocked))
	for _, id := range written.Blocked {
		held[id] = true
		waiting[id] = !freed[id]
	}
	if written.Created {
		// Every row is ours, as planned: no need to read them back.
		pending := make([]Pending, 0, len(written.Rows))
		for _, r := range written.Rows {
			if (claimedIDs[r.ID] && !freed[r.ID]) || waiting[r.ID] {
				continue
			}
			if r.Status == wantStatus && (wantStatus == models.StatusFailed || r.LastError == syncPending) {
				pending = append(pending, Pending{ID: r.ID, WebhookName: r.WebhookName, Queue: p.queues[r.WebhookID]})
			}
		}
		inline := make([]*claimed, 0, len(p.inline))
		for _, c := range p.inline {
			if !held[c.row.ID] {
				inline = append(inline, c)
			}
		}
		return pending, inline
	}
	// Some rows existed already (an earlier or a concurrent fan-out of the
	// same event): what exists now, ours or theirs, says what is pending.
	// A claim is ours only when its row is: we inserted it.
	ours := make(map[string]bool, len(p.inline))
	pending := make([]Pending, 0, len(written.Existing))
	for _, r := range written.Existing {
		if waiting[r.ID] {
			continue
		}
		if freed[r.ID] {
			pending = append(pending, Pending{ID: r.ID, WebhookName: r.WebhookName, Queue: p.queues[r.WebhookID]})
			continue
		}
		if claimedIDs[r.ID] {
			ours[r.ID] = true
			continue
		}
		if r.Attempts != 0 || r.Status != wantStatus {
			continue
		}
		if wantStatus == models.StatusExhausted && !isSyncPending(written.Rows, r.ID) {
			continue
		}
		pending = append(pending, Pending{ID: r.ID, WebhookName: r.WebhookName, Queue: p.queues[r.WebhookID]})
	}
	inline := make([]*claimed, 0, len(ours))
	for _, c := range p.inline {
		if ours[c.row.ID] && !held[c.row.ID] {
			inline = append(inline, c)
		}
	}
	return pending, inline
}

// countUnbuilt tells the observer of the rows this call created Exhausted
// because their request could not be built. Only rows it created count: a
// re-run of the fan-out, or a racing one, finds them existing under IDs
// it did not plan, and counts nothing again.
func (p *eventPlan) countUnbuilt(written storage.Written) {
	if p.d.observer == nil || len(written.Rows) == 0 {
		return
	}
	ours := written.Rows
	if !written.Created {
		created := make(map[string]bool, len(written.Existing))
		for _, r := range written.Existing {
			created[r.ID] = true
		}
		ours = make([]models.Delivery, 0, len(written.Rows))
		for _, r := range written.Rows {
			if created[r.ID] {
				ours = append(ours, r)
			}
		}
	}
	for _, r := range ours {
		if r.Status == models.StatusExhausted && r.LastError != syncPending {
			p.d.Deliveries(r.Tenant, r.WebhookName, models.StatusExhausted, models.ReasonUnbuildable, 1)
		}
	}
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
// an Exhausted record saying why, so the operator sees it, with no payload
// and the document kept in url_doc. An evaluation stopped for no fault of
// the webhook's (onStop on the event task's retries: the process's heap
// ceiling, the time limit on the early runs) is no verdict: its error
// (wrapping budget.ErrOverloaded or budget.ErrTimeLimit) is returned
// instead.
func (d *Dispatcher) plan(w models.Webhook, ev Event, now time.Time, retries int, freeze func() (*string, error)) (models.Delivery, bool, error) {
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
	exhaust := func(reason string, err error) (models.Delivery, bool, error) {
		if onStop(err, retries) == stopRetryEvent {
			return models.Delivery{}, false, fmt.Errorf("webhook %q: %w", w.Name, err)
		}
		row.Status = models.StatusExhausted
		row.NextRetry = nil
		row.LastError = reason
		return row, true, nil
	}
	cond, err := d.conds.get(w.ConditionLanguage, w.Condition)
	if err != nil {
		return exhaust(fmt.Sprintf("condition %q does not compile: %v", w.Condition, err), err)
	}
	ok, err := cond.MatchWithin(ev.Doc, now, d.condTime)
	if err != nil {
		return exhaust(fmt.Sprintf("condition %q failed: %v", w.Condition, err), err)
	}
	if !ok {
		return models.Delivery{}, false, nil
	}
	b, err := build(w, ev.Doc, d.maxPayload, d.renderTime, now)
	if err != nil {
		// The row keeps the document, so that a retry or a resend can
		// build it with the webhook's definition once it is fixed
		// (recovery); FreezeDoc only fails on a document fan-out could
		// not have read, which no fix of the webhook can build.
		if frozen, ferr := freeze(); ferr == nil {
			row.URLDoc = frozen
		}
		return exhaust("cannot build request: "+err.Error(), err)
	}
	if w.URLTemplate != "" {
		// Rendered once and frozen into the row: every attempt of this
		// delivery goes to the URL the webhook's template then makes with
		// the document kept here (dispatch.request).
		frozen, err := freeze()
		if err != nil {
			return exhaust("cannot build request: "+err.Error(), err)
		}
		row.URLDoc = frozen
	}
	row.URL, row.Headers, row.Payload = b.URL, b.Headers, b.Payload
	return row, true, nil
}

// logStopped says why a fan-out wrote nothing and is run again.
func (d *Dispatcher) logStopped(ev Event, err error, retries int) {
	if errors.Is(err, budget.ErrOverloaded) {
		d.log.Error("fan-out stopped: this process is past its memory ceiling (process.memory_limit); the event is fanned out again later",
			"event", ev.ID, "error", err.Error())
		return
	}
	d.log.Warn("fan-out stopped: a webhook's definition reached its time limit, because this worker was too busy or the definition is too slow; the event is fanned out again later, and from its task's retry "+
		strconv.Itoa(SlowFinalRetries)+" on such a webhook is Exhausted for it",
		"event", ev.ID, "retries", retries, "error", err.Error())
}

// conditionCache keeps compiled conditions by source text; webhooks share
// few distinct conditions, and compiling one per event would dominate.
type conditionCache struct {
	mu sync.Mutex
	m  map[string]*condition.Condition
}

func newConditionCache() *conditionCache {
	return &conditionCache{m: make(map[string]*condition.Condition)}
}

func (c *conditionCache) get(language, src string) (*condition.Condition, error) {
	key := src
	if language == condition.LanguagePython {
		key = "python\x00" + src // expr sources are keyed as they were
	}
	c.mu.Lock()
	cond, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return cond, nil
	}
	cond, err := condition.CompileIn(language, src)
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
