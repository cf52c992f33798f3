package storage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homingdev/homing/models"
)

// The Postgres store's batched statements: each run function takes the
// inputs of every caller a group gathered and answers each in order.

// batch runs the batched statements on the database's pool.
type batch struct {
	db *sql.DB
}

// matchKey is what selects an event's webhooks: its tenant comes first, so
// that two tenants' webhooks of one doctype and event never share an answer.
type matchKey struct{ tenant, docType, event string }

// matchResult is one key's webhooks and the webhooks_version they were
// read at (0 when there are none).
type matchResult struct {
	hooks   []models.Webhook
	version int64
}

// matchSQL loads the enabled webhooks of several (tenant, doctype, event)
// triples, each row with the webhooks_version of the statement's snapshot.
// A disabled tenant's are read too: its events are kept, and the claim
// holds their rows (GORM.match). Served by webhooks_match (tenant,
// doc_type, doc_event) WHERE enabled.
const matchSQL = `SELECT (SELECT n FROM webhooks_version), ` + webhookColumns + ` FROM webhooks
WHERE enabled AND (tenant, doc_type, doc_event) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
ORDER BY id`

// runMatch answers each key with its webhooks in ID order. Callers of one
// key share the result's maps and slices, which nothing mutates.
func (b *batch) runMatch(ctx context.Context, keys []matchKey) ([]matchResult, error) {
	tenants := make([]string, 0, len(keys))
	docTypes := make([]string, 0, len(keys))
	events := make([]string, 0, len(keys))
	seen := make(map[matchKey]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			tenants = append(tenants, k.tenant)
			docTypes = append(docTypes, k.docType)
			events = append(events, k.event)
		}
	}
	rows, err := b.db.QueryContext(ctx, matchSQL, planEach, tenants, docTypes, events)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var version int64
	byKey := make(map[matchKey][]models.Webhook, len(seen))
	for rows.Next() {
		var w models.Webhook
		if err := scanWebhook(rows, &w, &version); err != nil {
			return nil, err
		}
		k := matchKey{w.Tenant, w.DocType, w.DocEvent}
		byKey[k] = append(byKey[k], w)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]matchResult, len(keys))
	for i, k := range keys {
		if hooks := byKey[k]; len(hooks) > 0 {
			out[i] = matchResult{hooks: hooks, version: version}
		}
	}
	return out, nil
}

// insertSet is one fan-out's rows, planned from webhooks read at version;
// 0 writes them whatever webhooks_version reads.
type insertSet struct {
	rows    []models.Delivery
	version int64
	// release is the event's outbox row to delete with the rows, if any.
	release *eventKey
}

// eventKey names an event: its ID is unique within its tenant.
type eventKey struct{ tenant, id string }

// insertResult is how many of a set's rows the INSERT created, and the
// webhooks_version it read. A set whose version differs from it was not
// written at all.
type insertResult struct {
	created int
	// held are the created rows planned claimed that the INSERT wrote
	// unclaimed, their tenant being disabled (Written.Held).
	held []string
	// blocked are the created ordered rows planned claimed that the
	// INSERT wrote unclaimed (Written.Blocked).
	blocked []string
	version int64
	// released: the set's outbox row was deleted by the statement.
	released bool
}

// insertSQL is the fan-out's INSERT for the rows of several events. A row
// whose (event, webhook) exists already is skipped, as in insert, and so is
// a row planned from webhooks older than webhooks_version (hookCache). It
// answers one row per created delivery, and one with no ID that carries the
// version it compared with. The documents rows keep (url_doc) are sent
// once each ($22) and each row names its own by position: every row of an
// event keeps the same document, and an event with many webhooks would
// otherwise send (and encode) it once a row.
//
// The same statement releases the events' outbox rows ($23, $24; $25 each
// one's version as $21 has it): a fan-out through the durable intake then
// costs no statement and commit of its own to let its event go, and the
// rows and the release are one commit. A row is released only if its
// set's rows were written (the version check) and no one holds it: a relay
// queueing it holds its lock, and SKIP LOCKED leaves it to the caller's
// own release (outbox.Completer) instead of holding up the whole batch.
// The rows returned with a tenant and an event ID are the released ones.
// Served by outbox_events_event (event_id).
//
// A row planned claimed (Failed with an attempt counted: the event task's
// own first attempt) is claimed only if its tenant is enabled as this
// statement reads it, the claim's check (tenantEnabled); otherwise it is
// written unclaimed, attempts 0 and due at its created_at (Written.Held:
// returned with no attempt though planned with one). Served by tenants'
// primary key. An ordered row ($28, accept_seq; 0 draws one from the
// outbox's sequence) planned claimed is claimed only if the ordering rule
// does not hold it (orderBlocked) as this statement reads the table; the
// rows of one key in the same statement do not see each other, so
// runInsert plans none of them claimed. A held row is written unclaimed,
// due OrderRecheck later (Written.Blocked); the caller asks again once
// it is committed (Store.Unblocked).
var insertSQL = `WITH cur AS (SELECT n FROM webhooks_version),
ins AS (
	INSERT INTO deliveries (` + deliveryColumns + `)
	SELECT id, webhook_id, webhook_name, event_id, doc_type, doc_name, doc_event, method, url, headers,
		payload, status, CASE WHEN v.held OR v.blocked THEN 0 ELSE v.attempts END, max_retries,
		CASE WHEN v.held THEN v.created_at WHEN v.blocked THEN v.created_at + ` + orderRecheckSQL + ` ELSE v.next_retry END, last_error, created_at, updated_at, ($22::text[])[v.url_doc], tenant, accepted_at, trace_context,
		accept_seq
	FROM (SELECT *, status = 'Failed' AND attempts > 0 AND NOT ` + tenantEnabled("u") + ` AS held,
			status = 'Failed' AND attempts > 0 AND ` + orderBlocked("u") + ` AS blocked
		FROM (SELECT ` + deliveryColumnsBase + `, CASE WHEN s.accept_seq = 0 THEN nextval('outbox_events_id_seq') ELSE s.accept_seq END AS accept_seq, version
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::text[], $10::text[], $11::bytea[], $12::text[], $13::integer[], $14::integer[], $15::timestamptz[], $16::text[],
			$17::timestamptz[], $18::timestamptz[], $19::integer[], $20::text[], $26::timestamptz[], $27::text[], $28::bigint[], $21::bigint[])
			AS s(` + deliveryColumns + `, version)) u) v
	WHERE v.version IS NULL OR v.version = (SELECT n FROM cur)
	ON CONFLICT (event_id, webhook_id) DO NOTHING
	RETURNING id, attempts, accept_seq IS NOT NULL AS ordered
), rel AS (
	DELETE FROM outbox_events WHERE id IN (
		SELECT o.id FROM outbox_events o
		WHERE o.event_id = ANY($24::text[]) AND (o.tenant, o.event_id) IN (
			SELECT r.tenant, r.event_id FROM unnest($23::text[], $24::text[], $25::bigint[]) AS r(tenant, event_id, version)
			WHERE r.version IS NULL OR r.version = (SELECT n FROM cur))
		FOR UPDATE SKIP LOCKED)
	RETURNING tenant, event_id
)
SELECT id, attempts, ordered, NULL, NULL, NULL FROM ins UNION ALL SELECT NULL, NULL, NULL, n, NULL, NULL FROM cur
UNION ALL SELECT NULL, NULL, NULL, NULL, tenant, event_id FROM rel`

// unclaimSameKey plans unclaimed every ordered row planned claimed whose
// key has another ordered row in the same statement: one statement's rows
// do not see each other, so its ordering check could pass them all. Their
// first attempts go through a task each, whose claim sees the committed
// rows. Such a row is due OrderRecheck after its creation, as one the
// INSERT holds.
func unclaimSameKey(sets []insertSet) {
	count := make(map[OrderKey]int)
	for i := range sets {
		for _, r := range sets[i].rows {
			if k := KeyOf(r); k != nil {
				count[*k]++
			}
		}
	}
	for i := range sets {
		for j := range sets[i].rows {
			r := &sets[i].rows[j]
			if k := KeyOf(*r); k != nil && count[*k] > 1 && r.Status == models.StatusFailed && r.Attempts > 0 {
				recheck := r.CreatedAt.Add(OrderRecheck)
				r.Attempts, r.NextRetry = 0, &recheck
			}
		}
	}
}

// runInsert inserts every caller's rows in one statement and answers each
// with how many of its rows it created. The rows go in (event, webhook)
// order, so two statements that hold rows of the same events wait for each
// other instead of deadlocking.
func (b *batch) runInsert(ctx context.Context, sets []insertSet) ([]insertResult, error) {
	type planned struct {
		row     *models.Delivery
		version *int64
	}
	var all []planned
	owner := make(map[string]int)
	// claimed are the rows planned claimed at insert.
	claimed := make(map[string]bool)
	for i := range sets {
		set := &sets[i]
		var version *int64
		if set.version != 0 {
			version = &set.version
		}
		for j := range set.rows {
			r := &set.rows[j]
			all = append(all, planned{r, version})
			owner[r.ID] = i
			if r.Status == models.StatusFailed && r.Attempts > 0 {
				claimed[r.ID] = true
			}
		}
	}
	// After claimed is read: a row unclaimed here is reported blocked.
	unclaimSameKey(sets)
	slices.SortFunc(all, func(a, b planned) int {
		return cmp.Or(cmp.Compare(a.row.EventID, b.row.EventID), cmp.Compare(a.row.WebhookID, b.row.WebhookID))
	})
	n := len(all)
	var (
		ids, webhookIDs, webhookNames, eventIDs = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		docTypes, docNames, docEvents           = make([]string, n), make([]string, n), make([]string, n)
		methods, urls, headers, statuses        = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		lastErrors                              = make([]string, n)
		payloads                                = make([][]byte, n)
		attempts, maxRetries                    = make([]int32, n), make([]int32, n)
		nextRetries                             = make([]*time.Time, n)
		createdAts, updatedAts                  = make([]time.Time, n), make([]time.Time, n)
		urlDocs                                 = make([]*int32, n)
		docs                                    []string
		docAt                                   = make(map[*string]int32)
		tenants                                 = make([]string, n)
		versions                                = make([]*int64, n)
		acceptedAts                             = make([]*time.Time, n)
		seqs                                    = make([]*int64, n)
		// traces stays nil (NULL, which unnest pads with NULLs) unless a
		// row keeps a trace context: untraced fan-outs send nothing more.
		traces []*string
	)
	for i, p := range all {
		r := p.row
		h, err := r.Headers.Value()
		if err != nil {
			return nil, err
		}
		ids[i], webhookIDs[i], webhookNames[i], eventIDs[i] = r.ID, r.WebhookID, r.WebhookName, r.EventID
		docTypes[i], docNames[i], docEvents[i] = r.DocType, r.DocName, r.DocEvent
		methods[i], urls[i], headers[i], statuses[i] = r.Method, r.URL, h.(string), r.Status
		lastErrors[i], payloads[i] = r.LastError, r.Payload
		attempts[i], maxRetries[i] = int32(r.Attempts), int32(r.MaxRetries)
		nextRetries[i], createdAts[i], updatedAts[i] = r.NextRetry, r.CreatedAt, r.UpdatedAt
		if r.URLDoc != nil {
			at, ok := docAt[r.URLDoc]
			if !ok {
				docs = append(docs, *r.URLDoc)
				at = int32(len(docs)) // SQL arrays count from 1
				docAt[r.URLDoc] = at
			}
			urlDocs[i] = &at
		}
		tenants[i], versions[i], acceptedAts[i], seqs[i] = models.TenantOr(r.Tenant), p.version, r.AcceptedAt, r.AcceptSeq
		if r.TraceContext != nil {
			if traces == nil {
				traces = make([]*string, n)
			}
			traces[i] = r.TraceContext
		}
	}
	var relTenants, relIDs []string
	var relVersions []*int64
	releasedBy := make(map[eventKey][]int)
	for i, set := range sets {
		if set.release == nil {
			continue
		}
		k := *set.release
		if _, ok := releasedBy[k]; !ok {
			relTenants, relIDs = append(relTenants, k.tenant), append(relIDs, k.id)
			var v *int64
			if set.version != 0 {
				v = &set.version
			}
			relVersions = append(relVersions, v)
		}
		releasedBy[k] = append(releasedBy[k], i)
	}
	rows, err := b.db.QueryContext(ctx, insertSQL, ids, webhookIDs, webhookNames, eventIDs, docTypes, docNames, docEvents,
		methods, urls, headers, payloads, statuses, attempts, maxRetries, nextRetries, lastErrors, createdAts, updatedAts, urlDocs, tenants, versions, docs,
		relTenants, relIDs, relVersions, acceptedAts, traces, seqs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]insertResult, len(sets))
	var current int64
	for rows.Next() {
		var (
			id              sql.NullString
			attempts        sql.NullInt32
			ordered         sql.NullBool
			version         sql.NullInt64
			tenant, eventID sql.NullString
		)
		if err := rows.Scan(&id, &attempts, &ordered, &version, &tenant, &eventID); err != nil {
			return nil, err
		}
		switch {
		case id.Valid:
			o := &out[owner[id.String]]
			o.created++
			switch {
			case attempts.Int32 != 0 || !claimed[id.String]:
			case ordered.Bool:
				o.blocked = append(o.blocked, id.String)
			default:
				o.held = append(o.held, id.String)
			}
		case eventID.Valid:
			for _, i := range releasedBy[eventKey{tenant.String, eventID.String}] {
				out[i].released = true
			}
		default:
			current = version.Int64
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].version = current
	}
	return out, nil
}

// recordSQL records several attempts in one statement: the attempt rows
// are inserted, each delivery updated fenced on its status and attempt
// count, and each webhook's health (webhook_health) moved. Served by the
// primary keys of deliveries and webhook_health.
//
// Health is the database's, not the worker's copy of the webhook. Per
// webhook, the batch's last success clears it (failing_since, failures and
// the probe); the failures after that success, or all of the batch's when
// it has none, start the failing_since clock unless it runs and add to
// failures: the health rule (health.go), with health a HealthSignal. Only a
// row whose health changes is written, so a healthy webhook's successes
// write nothing. webhook_health has no trigger: moving it leaves
// webhooks_version, and every worker's webhook cache, alone. A batch that
// moves two webhooks' health while another process moves the same two in
// the other order can deadlock; PostgreSQL then fails one statement, and its
// batch is recorded again one attempt at a time.
//
// An ordered delivery made final (fin) wakes the next of its key (woken,
// order.go's wake): the first Failed row of the key after it not made
// final by this statement (whose own updates it cannot see), if it has no
// attempt counted. An unordered batch's fin is empty. Served by deliveries_order.
const recordSQL = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::integer[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::bigint[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::text[], $15::text[], $16::timestamptz[], $17::text[], $18::integer[],
		$19::text[], $20::integer[], $21::text[])
	AS v(delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms,
		class, error, response, status, next_retry, last_error, last_response, updated_at, from_status, from_attempts,
		webhook_id, health, tenant)
), attempt AS (
	INSERT INTO delivery_attempts (delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms, class, error, response, tenant)
	SELECT delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms, class, error, response, tenant FROM v
), last_ok AS (
	SELECT webhook_id, max(updated_at) FILTER (WHERE health = 1) AS at FROM v WHERE health <> 0 GROUP BY webhook_id
), clock AS (
	SELECT l.webhook_id, l.at AS last_ok, min(f.updated_at) AS failing_since, count(f.delivery_id) AS failures
	FROM last_ok l LEFT JOIN v f ON f.webhook_id = l.webhook_id AND f.health = 2 AND (l.at IS NULL OR f.updated_at > l.at)
	GROUP BY l.webhook_id, l.at
), moved AS (
	UPDATE webhook_health h SET
		failing_since = CASE WHEN c.last_ok IS NOT NULL THEN c.failing_since ELSE COALESCE(h.failing_since, c.failing_since) END,
		failures = CASE WHEN c.last_ok IS NOT NULL THEN c.failures ELSE h.failures + c.failures END,
		probe_id = CASE WHEN c.last_ok IS NOT NULL THEN NULL ELSE h.probe_id END,
		probe_at = CASE WHEN c.last_ok IS NOT NULL THEN NULL ELSE h.probe_at END
	FROM clock c
	WHERE h.webhook_id = c.webhook_id AND (c.failures > 0 OR h.failures > 0 OR h.failing_since IS NOT NULL OR h.probe_id IS NOT NULL)
), upd AS (
	UPDATE deliveries d SET status = v.status, next_retry = v.next_retry, last_status_code = v.status_code, last_error = v.last_error,
		last_response = v.last_response, method = v.method, url = v.url, updated_at = v.updated_at
	FROM v WHERE d.id = v.delivery_id AND d.status = v.from_status AND d.attempts = v.from_attempts
	RETURNING d.id, d.status, d.tenant, d.webhook_id, d.doc_type, d.doc_name, d.accept_seq, v.updated_at
), fin AS (
	SELECT * FROM upd WHERE accept_seq IS NOT NULL AND status IN ('Delivered', 'Exhausted')
), woken AS (
	UPDATE deliveries n SET next_retry = LEAST(n.next_retry, f.updated_at), queued_at = NULL, updated_at = f.updated_at
	FROM fin f
	WHERE n.id = (SELECT p.id FROM deliveries p WHERE p.tenant = f.tenant AND p.webhook_id = f.webhook_id AND p.doc_type = f.doc_type
			AND p.doc_name = f.doc_name AND p.status = 'Failed' AND p.accept_seq > f.accept_seq AND NOT EXISTS (SELECT 1 FROM fin g WHERE g.id = p.id)
			ORDER BY p.accept_seq LIMIT 1)
		AND n.attempts = 0
	RETURNING n.id, f.id AS after
)
SELECT id, NULL FROM upd UNION ALL SELECT after, id FROM woken`

// recordOut is what runRecord did for one outcome.
type recordOut struct {
	applied bool
	// woken is the delivery the outcome woke (Recorded.Woken).
	woken string
}

// runRecord records every caller's outcome in one statement and answers
// each with whether its delivery row took the outcome, and the delivery it
// woke. The rows are updated in ID order, so two statements never deadlock
// on each other's rows.
func (b *batch) runRecord(ctx context.Context, ins []Outcome) ([]recordOut, error) {
	order := make([]int, len(ins))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(ins[x].Attempt.DeliveryID, ins[y].Attempt.DeliveryID) })
	n := len(ins)
	var (
		ids, methods, urls, headers          = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		classes, errs, responses, statuses   = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		lastErrors, lastResponses, fromState = make([]string, n), make([]string, n), make([]string, n)
		attempts, fromAttempts               = make([]int32, n), make([]int32, n)
		codes                                = make([]*int32, n)
		durations                            = make([]int64, n)
		ats, updatedAts                      = make([]time.Time, n), make([]time.Time, n)
		nexts                                = make([]*time.Time, n)
		webhookIDs, tenants                  = make([]string, n), make([]string, n)
		health                               = make([]int32, n)
	)
	for i, k := range order {
		o := ins[k]
		webhookIDs[i], health[i] = o.WebhookID, int32(o.Health)
		a := o.Attempt
		tenants[i] = models.TenantOr(a.Tenant)
		h, err := a.RequestHeaders.Value()
		if err != nil {
			return nil, fmt.Errorf("record attempt %d of delivery %s: %w", a.Attempt, a.DeliveryID, err)
		}
		ids[i], attempts[i], ats[i], methods[i], urls[i], headers[i] = a.DeliveryID, int32(a.Attempt), a.At, a.Method, a.URL, h.(string)
		if a.StatusCode != nil {
			c := int32(*a.StatusCode)
			codes[i] = &c
		}
		durations[i], classes[i], errs[i], responses[i] = a.DurationMS, a.Class, a.Error, a.Response
		statuses[i], nexts[i], lastErrors[i], lastResponses[i], updatedAts[i] = o.Status, o.NextRetry, o.LastError, o.LastResponse, o.UpdatedAt
		fromState[i], fromAttempts[i] = o.FromStatus, int32(a.Attempt)
	}
	rows, err := b.db.QueryContext(ctx, recordSQL, planEach, ids, attempts, ats, methods, urls, headers, codes, durations,
		classes, errs, responses, statuses, nexts, lastErrors, lastResponses, updatedAts, fromState, fromAttempts, webhookIDs, health, tenants)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := make(map[string]bool, n)
	woken := make(map[string]string)
	for rows.Next() {
		var id string
		var next sql.NullString
		if err := rows.Scan(&id, &next); err != nil {
			return nil, err
		}
		if next.Valid {
			woken[id] = next.String
		} else {
			applied[id] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]recordOut, n)
	for i, o := range ins {
		out[i] = recordOut{applied: applied[o.Attempt.DeliveryID], woken: woken[o.Attempt.DeliveryID]}
	}
	return out, nil
}

// claimOut is what the claim took, when ok.
type claimOut struct {
	claim Claim
	ok    bool
}

// claimColumns is what an attempt needs of the delivery and its webhook, in
// the order scanClaim reads them, and the due time the claim replaced.
const claimColumns = `d.id, d.tenant, d.webhook_id, d.webhook_name, d.event_id, d.headers, d.payload, d.status,
	d.attempts, d.max_retries, d.next_retry, d.created_at, d.accepted_at, d.url, d.url_doc, d.trace_context,
	w.id, w.tenant, w.name, w.request_url, w.request_method, w.secret, w.previous_secrets, w.signature_scheme,
	w.enabled, w.disabled_reason, (SELECT failing_since FROM webhook_health WHERE webhook_id = w.id), w.rate_limit, w.headers,
	w.timeout_ms, w.queue, w.follow_redirects, w.url_template, w.compat, old.next_retry, d.doc_type, d.doc_name, d.doc_event, d.accept_seq`

func scanClaim(rows *sql.Rows, c *Claim) error {
	row, hook := &c.Row, &models.Webhook{}
	err := rows.Scan(&row.ID, &row.Tenant, &row.WebhookID, &row.WebhookName, &row.EventID, &row.Headers, &row.Payload, &row.Status,
		&row.Attempts, &row.MaxRetries, &row.NextRetry, &row.CreatedAt, &row.AcceptedAt, &row.URL, &row.URLDoc, &row.TraceContext,
		&hook.ID, &hook.Tenant, &hook.Name, &hook.RequestURL, &hook.RequestMethod, &hook.Secret, &hook.PreviousSecrets, &hook.SignatureScheme,
		&hook.Enabled, &hook.DisabledReason, &hook.FailingSince, &hook.RateLimit, &hook.Headers, &hook.TimeoutMS, &hook.Queue,
		&hook.FollowRedirects, &hook.URLTemplate, &hook.Compat, &c.PrevNext, &row.DocType, &row.DocName, &row.DocEvent, &row.AcceptSeq)
	if err != nil {
		return err
	}
	if row.NextRetry == nil {
		return errors.New("claimed row has no next_retry")
	}
	if hook.Headers == nil {
		hook.Headers = models.StringMap{}
	}
	c.Hook, c.Claimed, c.Found = hook, true, true
	return nil
}

// claimSQL claims several deliveries: each row is claimed, as the reference
// Claim would, under its own mode's condition and time and only while its
// tenant is enabled, and read back with its webhook and the due time the
// claim replaced (old reads the row as it was before this statement).
// Served by the primary keys of deliveries, webhooks and tenants. An
// ordered row is claimed only while the ordering rule does not hold it
// (orderBlocked: deliveries_order, outbox_events_doc); an unordered row's
// claim pays one column test for it.
var claimSQL = `UPDATE deliveries AS d
SET attempts = d.attempts + 1, updated_at = v.now, queued_at = NULL,
	next_retry = v.now + (w.timeout_ms + $4) * interval '1 millisecond'
FROM unnest($1::text[], $2::boolean[], $3::timestamptz[]) AS v(id, retry, now), deliveries AS old, webhooks AS w
WHERE old.id = v.id AND d.id = v.id AND w.id = d.webhook_id AND w.enabled AND d.status = 'Failed'
	AND ` + tenantEnabled("d") + `
	AND CASE WHEN v.retry THEN d.next_retry <= v.now AND ` + notHeld("d") + ` ELSE d.attempts = 0 END
	AND NOT ` + orderBlocked("d") + `
RETURNING ` + claimColumns

// runClaim claims every caller's delivery in one statement. Of several
// callers for the same delivery only the first can have it: the statement
// updates a row once, and the others answer not claimed, as the loser of
// two racing claims does.
func (b *batch) runClaim(ctx context.Context, ins []ClaimIn) ([]claimOut, error) {
	first := make(map[string]int, len(ins))
	var ids []string
	var retries []bool
	var nows []time.Time
	for i, in := range ins {
		if _, dup := first[in.ID]; dup {
			continue
		}
		first[in.ID] = i
		ids, retries, nows = append(ids, in.ID), append(retries, in.Mode == Retry), append(nows, in.Now)
	}
	rows, err := b.db.QueryContext(ctx, claimSQL, planEach, ids, retries, nows, LeaseMargin.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]claimOut, len(ins))
	for rows.Next() {
		var c Claim
		if err := scanClaim(rows, &c); err != nil {
			return nil, err
		}
		out[first[c.Row.ID]] = claimOut{claim: c, ok: true}
	}
	return out, rows.Err()
}
