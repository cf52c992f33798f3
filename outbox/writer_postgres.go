package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// writeNewSQL records the IDs of a batch and writes the new events to the
// outbox in one statement, so on PostgreSQL a batch of publishes is one
// round trip and one commit instead of four (BEGIN, the two INSERTs,
// COMMIT). One statement is one transaction: an ID is recorded if and only
// if its event is written. An ID repeated within the batch is recorded and
// written once, for its first occurrence (DISTINCT ON … ord); ON CONFLICT DO
// NOTHING skips the later ones as it skips IDs recorded before. RETURNING
// names the IDs new to the outbox. Served by published_events' primary key
// (the conflicts); the CTEs join nothing else.
const writeNewSQL = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[])
		WITH ORDINALITY AS v(tenant, event_id, payload, body_hash, created_at, queued_at, ord)
), rec AS (
	INSERT INTO published_events (tenant, event_id, created_at, body_hash)
	SELECT tenant, event_id, created_at, body_hash FROM v ORDER BY ord
	ON CONFLICT (tenant, event_id) DO NOTHING
	RETURNING tenant, event_id
), added AS (
	INSERT INTO outbox_events (tenant, event_id, payload, created_at, queued_at)
	SELECT DISTINCT ON (v.tenant, v.event_id) v.tenant, v.event_id, v.payload, v.created_at, v.queued_at
	FROM v JOIN rec ON rec.tenant = v.tenant AND rec.event_id = v.event_id
	ORDER BY v.tenant, v.event_id, v.ord
)
SELECT tenant, event_id FROM rec`

// writeBatchPostgres is writeBatch on PostgreSQL: the new events in one
// statement (writeNewSQL), then, only when the batch holds repeats, the
// repeats' transaction (handleRepeats), as writeBatch runs it. The two need
// not share a transaction: the repeats only read what the first committed
// and queue again what is still in the outbox, as a later request would.
func writeBatchPostgres(ctx context.Context, sqlDB *sql.DB, db *gorm.DB, ins []writeIn, queued bool) ([]Outcome, error) {
	n := len(ins)
	tenants, ids, payloads, hashes := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	created, queuedAt := make([]time.Time, n), make([]*time.Time, n)
	for i, in := range ins {
		tenants[i], ids[i], payloads[i], hashes[i], created[i] = in.tenant, in.id, string(in.payload), in.hash, in.now
		if queued {
			queuedAt[i] = &ins[i].now
		}
	}
	rows, err := sqlDB.QueryContext(ctx, writeNewSQL, tenants, ids, payloads, hashes, created, queuedAt)
	if err != nil {
		return nil, fmt.Errorf("record %d events in the outbox: %w", n, err)
	}
	isNew := make(map[eventKey]bool, n)
	for rows.Next() {
		var k eventKey
		if err := rows.Scan(&k.tenant, &k.id); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("record %d events in the outbox: %w", n, err)
		}
		isNew[k] = true
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("record %d events in the outbox: %w", n, err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record %d events in the outbox: %w", n, err)
	}
	outs := make([]Outcome, n)
	var again []eventKey
	for i, in := range ins {
		k := in.key()
		if !isNew[k] {
			again = append(again, k)
			continue
		}
		outs[i] = Added
		delete(isNew, k) // a repeat later in the batch is a repeat
	}
	if len(again) == 0 {
		return outs, nil
	}
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return handleRepeats(tx, ins, outs, again)
	})
	return outs, err
}
