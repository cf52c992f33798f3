package dispatch

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/homingdev/homing/models"
)

// The delivery hot path's three statements on PostgreSQL (the webhooks of
// an event, the fan-out's INSERT, the outcome of an attempt) each run
// through a group, so that concurrent tasks of one worker share statements
// and commits. Each is one fixed statement text whatever the batch size:
// the inputs travel as arrays and unnest into rows, so pgx prepares it once
// per connection.

// groupMaxBatch bounds the inputs of one batched statement.
const groupMaxBatch = 256

// groupMaxRunning is how many statements of one kind may be in flight at
// once. Two let a batch form while the other runs without leaving a lone
// caller waiting behind a long statement.
const groupMaxRunning = 1

// batched holds the dispatcher's groups; nil when the database is not
// PostgreSQL, whose arrays they need.
type batched struct {
	db     *sql.DB
	match  *group[matchKey, []models.Webhook]
	insert *group[[]models.Delivery, int]
	record *group[recordIn, bool]
}

func newBatched(db *sql.DB) *batched {
	b := &batched{db: db}
	b.match = &group[matchKey, []models.Webhook]{run: b.runMatch, maxBatch: groupMaxBatch, maxRunning: groupMaxRunning}
	b.insert = &group[[]models.Delivery, int]{run: b.runInsert, maxBatch: groupMaxBatch, maxRunning: groupMaxRunning}
	b.record = &group[recordIn, bool]{run: b.runRecord, maxBatch: groupMaxBatch, maxRunning: groupMaxRunning}
	return b
}

// matchKey is what selects an event's webhooks.
type matchKey struct{ docType, event string }

// matchSQL loads the enabled webhooks of several (doctype, event) pairs.
// Served by webhooks_match (doc_type, doc_event) WHERE enabled.
const matchSQL = `SELECT ` + webhookColumns + ` FROM webhooks
WHERE enabled AND (doc_type, doc_event) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY id`

// runMatch answers each key with its webhooks in ID order. Callers of one
// key share the result's maps and slices, which nothing mutates.
func (b *batched) runMatch(ctx context.Context, keys []matchKey) ([][]models.Webhook, error) {
	docTypes := make([]string, 0, len(keys))
	events := make([]string, 0, len(keys))
	seen := make(map[matchKey]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			docTypes = append(docTypes, k.docType)
			events = append(events, k.event)
		}
	}
	rows, err := b.db.QueryContext(ctx, matchSQL, docTypes, events)
	if err != nil {
		return nil, err
	}
	hooks, err := scanWebhooks(rows)
	if err != nil {
		return nil, err
	}
	byKey := make(map[matchKey][]models.Webhook, len(seen))
	for _, w := range hooks {
		k := matchKey{w.DocType, w.DocEvent}
		byKey[k] = append(byKey[k], w)
	}
	out := make([][]models.Webhook, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out, nil
}

// insertSQL is the fan-out's INSERT for the rows of several events. A row
// whose (event, webhook) exists already is skipped, as in insert; RETURNING
// says which rows this statement created.
const insertSQL = `INSERT INTO deliveries (` + deliveryColumns + `)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
	$10::text[], $11::bytea[], $12::text[], $13::integer[], $14::integer[], $15::timestamptz[], $16::text[], $17::timestamptz[], $18::timestamptz[])
ON CONFLICT (event_id, webhook_id) DO NOTHING
RETURNING id`

// runInsert inserts every caller's rows in one statement and answers each
// with how many of its rows it created. The rows go in (event, webhook)
// order, so two statements that hold rows of the same events wait for each
// other instead of deadlocking.
func (b *batched) runInsert(ctx context.Context, sets [][]models.Delivery) ([]int, error) {
	var all []*models.Delivery
	owner := make(map[string]int)
	for i, set := range sets {
		for j := range set {
			all = append(all, &set[j])
			owner[set[j].ID] = i
		}
	}
	slices.SortFunc(all, func(a, b *models.Delivery) int {
		return cmp.Or(cmp.Compare(a.EventID, b.EventID), cmp.Compare(a.WebhookID, b.WebhookID))
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
	)
	for i, r := range all {
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
	}
	rows, err := b.db.QueryContext(ctx, insertSQL, ids, webhookIDs, webhookNames, eventIDs, docTypes, docNames, docEvents,
		methods, urls, headers, payloads, statuses, attempts, maxRetries, nextRetries, lastErrors, createdAts, updatedAts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	created := make([]int, len(sets))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		created[owner[id]]++
	}
	return created, rows.Err()
}

// recordIn is one attempt's outcome for the batched record.
type recordIn struct {
	attempt      models.Attempt
	outcome      outcomeRow
	fromStatus   string
	fromAttempts int
}

// recordSQL is recordOne for several attempts whose webhook's health does
// not change: the attempt rows are inserted and each delivery updated fenced
// on its status and attempt count, in one statement. Served by the primary
// key of deliveries.
const recordSQL = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::integer[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::bigint[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::text[], $15::text[], $16::timestamptz[], $17::text[], $18::integer[])
	AS v(delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms,
		class, error, response, status, next_retry, last_error, last_response, updated_at, from_status, from_attempts)
), attempt AS (
	INSERT INTO delivery_attempts (delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms, class, error, response)
	SELECT delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms, class, error, response FROM v
)
UPDATE deliveries d SET status = v.status, next_retry = v.next_retry, last_status_code = v.status_code, last_error = v.last_error,
	last_response = v.last_response, method = v.method, url = v.url, updated_at = v.updated_at
FROM v WHERE d.id = v.delivery_id AND d.status = v.from_status AND d.attempts = v.from_attempts
RETURNING d.id`

// runRecord records every caller's outcome in one statement and answers
// each with whether its delivery row took the outcome. The rows are updated
// in ID order, so two statements never deadlock on each other's rows.
func (b *batched) runRecord(ctx context.Context, ins []recordIn) ([]bool, error) {
	order := make([]int, len(ins))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(ins[x].attempt.DeliveryID, ins[y].attempt.DeliveryID) })
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
	)
	for i, k := range order {
		in := ins[k]
		a, o := in.attempt, in.outcome
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
		statuses[i], nexts[i], lastErrors[i], lastResponses[i], updatedAts[i] = o.status, o.next, o.lastError, o.lastResponse, o.at
		fromState[i], fromAttempts[i] = in.fromStatus, int32(in.fromAttempts)
	}
	rows, err := b.db.QueryContext(ctx, recordSQL, ids, attempts, ats, methods, urls, headers, codes, durations,
		classes, errs, responses, statuses, nexts, lastErrors, lastResponses, updatedAts, fromState, fromAttempts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := make(map[string]bool, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		applied[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for i, in := range ins {
		out[i] = applied[in.attempt.DeliveryID]
	}
	return out, nil
}
