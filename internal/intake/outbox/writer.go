package outbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/groupcommit"
	"github.com/homingdev/homing/models"
)

// Writer adds events to the outbox for homing serve: concurrent requests
// share one transaction and its commit (group commit), and that
// transaction is three statements whatever the number of events (record
// the IDs, write the new events, queue the repeats again) instead of two or
// three per event. Each event gets the Outcome Add would give it alone,
// also an ID repeated within one batch.
//
// With a queue (WriterConfig.Queue) the Writer also queues each new event's
// task itself once its transaction has committed, as the relay would: the
// row is written already marked queued (queued_at), so the relay never
// reads, locks or updates it, and the event reaches the workers without
// waiting for the relay's wake-up. What the Writer fails to queue (Redis
// away, or the process killed between the commit and the enqueue) is
// still in the outbox: a failed enqueue hands the row back to the relay
// (queued_at cleared, which notifies it), and a row left marked by a
// killed process is found by the relay's Recover once outbox.recover_after
// has passed (its task missing from Redis), so no accepted event is lost;
// it waits at most outbox.recover_after and a quarter more.
type Writer struct {
	g     *groupcommit.Group[writeIn, Outcome]
	db    *gorm.DB
	queue *asynq.Client
	log   *slog.Logger
}

// WriterConfig says whether a Writer queues the events it writes.
type WriterConfig struct {
	// Queue, when set, is the asynq client the Writer queues each new
	// event's task with after its commit; nil leaves them to the relay.
	Queue  *asynq.Client
	Logger *slog.Logger
}

// queueTimeout bounds a Writer's enqueue of one event, and the hand-back
// of its row to the relay when that fails: the request that published it
// waits for both.
const queueTimeout = 5 * time.Second

type writeIn struct {
	tenant  string
	id      string
	payload []byte
	// hash is the hex SHA-256 of payload: what a repeat of id is compared
	// with.
	hash string
	// trace is the event's trace context (trace_context; nil: none). It
	// is not part of hash: a republish from another trace is the same
	// event.
	trace *string
	// accept is random to this call of AddJSON (published_events.accept_id):
	// how a write run again after an ambiguous commit knows its own record.
	accept string
	now    time.Time
	// docType, docName and docEvent name the event's document
	// (outbox_events.doc_type …: the row holds the document's later
	// ordered deliveries until it is fanned out).
	docType, docName, docEvent string
	// seq is the outbox row's id once written (writeBatch), which the
	// event's task carries (event.AcceptSeqHeader).
	seq *int64
}

func (in writeIn) key() eventKey { return eventKey{in.tenant, in.id} }

// writerBatch bounds one transaction: a few hundred events of up to
// delivery.max_payload_bytes each, and 5 parameters per event.
const writerBatch = 200

// NewWriter builds a Writer over db's outbox.
func NewWriter(db *gorm.DB, cfg WriterConfig) *Writer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	queued := cfg.Queue != nil
	return &Writer{db: db, queue: cfg.Queue, log: cfg.Logger, g: groupcommit.New(func(ctx context.Context, ins []writeIn) ([]Outcome, error) {
		var outs []Outcome
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			outs, err = writeBatch(tx, ins, queued)
			return err
		})
		return outs, err
	}, writerBatch, 1, groupTimeout)}
}

// AddJSON is Add for an event whose document is already encoded as JSON
// (doc, as the request carried it; ev.Doc is not read), in a transaction
// shared with concurrent callers. An invalid event is refused before it
// joins one. A repeated ID whose event differs from the one first accepted
// (compared by the SHA-256 of the encoded event, so whitespace in doc does
// not count but a changed value or key order does) is a Conflict.
func (w *Writer) AddJSON(ctx context.Context, ev event.Event, doc json.RawMessage, now time.Time) (Outcome, error) {
	if err := ev.Validate(); err != nil {
		return Repeated, err
	}
	payload, err := event.EncodeJSON(ev, doc)
	if err != nil {
		return Repeated, err
	}
	sum := sha256.Sum256(payload)
	in := writeIn{tenant: models.TenantOr(ev.Tenant), id: ev.ID, payload: payload, hash: hex.EncodeToString(sum[:]), now: now.UTC().Truncate(time.Microsecond),
		accept: rand.Text(), trace: stored(ev.TraceContext), docType: ev.DocType, docName: ev.DocName, docEvent: ev.Event, seq: new(int64)}
	outcome, err := w.g.Do(ctx, in)
	if err == nil && outcome == Added && w.queue != nil {
		w.enqueue(ctx, in)
	}
	return outcome, err
}

// enqueue queues the task of in, committed already marked queued, as the
// relay would; when Redis refuses it, the row is handed back to the relay.
// The event is accepted either way: it is in the outbox.
func (w *Writer) enqueue(ctx context.Context, in writeIn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueTimeout)
	defer cancel()
	err := relay(ctx, w.queue, models.OutboxEvent{ID: *in.seq, Tenant: in.tenant, EventID: in.id, Payload: string(in.payload), TraceContext: in.trace, CreatedAt: in.now})
	if err == nil || errors.Is(err, asynq.ErrTaskIDConflict) {
		// A conflict: the event's task is in Redis already (a republish
		// queued it meanwhile).
		return
	}
	// The relay queues it at its next poll, and warns while Redis is away.
	// Served by outbox_events_event (event_id); a row fanned out meanwhile
	// is gone.
	back := w.db.WithContext(ctx).Model(&models.OutboxEvent{}).
		Where("tenant = ? AND event_id = ?", in.tenant, in.id).Update("queued_at", nil)
	if back.Error != nil {
		w.log.Warn("published event not queued, and not handed to the relay either: the relay's recovery queues it within outbox.recover_after",
			"tenant", in.tenant, "event_id", in.id, "error", err.Error(), "hand_back_error", back.Error.Error())
		return
	}
	w.log.Debug("published event not queued; handed to the outbox relay", "tenant", in.tenant, "event_id", in.id, "error", err.Error())
}

// writeBatch writes ins through tx in three statements and returns each
// one's Outcome. With queued, new rows are written marked queued at their
// time (the Writer queues them itself).
func writeBatch(tx *gorm.DB, ins []writeIn, queued bool) ([]Outcome, error) {
	// 1. The idempotency records; RETURNING names the IDs new to the outbox.
	// Served by published_events' primary key.
	var sql strings.Builder
	args := make([]any, 0, 5*len(ins))
	sql.WriteString("INSERT INTO published_events (tenant, event_id, created_at, body_hash, accept_id) VALUES ")
	for i, in := range ins {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString("(?, ?, ?, ?, ?)")
		args = append(args, in.tenant, in.id, in.now, in.hash, in.accept)
	}
	sql.WriteString(" ON CONFLICT (tenant, event_id) DO NOTHING RETURNING tenant, event_id")
	var created []models.PublishedEvent
	if err := tx.Raw(sql.String(), args...).Scan(&created).Error; err != nil {
		return nil, fmt.Errorf("record %d events in the outbox: %w", len(ins), err)
	}
	isNew := make(map[eventKey]bool, len(created))
	for _, p := range created {
		isNew[eventKey{p.Tenant, p.EventID}] = true
	}

	// 2. The new events, each once (the first of an ID repeated in the batch).
	outs := make([]Outcome, len(ins))
	var (
		again []eventKey
		err   error
	)
	sql.Reset()
	args = args[:0]
	sql.WriteString("INSERT INTO outbox_events (tenant, event_id, payload, created_at, queued_at, trace_context, doc_type, doc_name, doc_event) VALUES ")
	written := make(map[eventKey]*int64, len(ins))
	for i, in := range ins {
		k := in.key()
		if !isNew[k] {
			again = append(again, k)
			continue
		}
		if len(args) > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		var queuedAt *time.Time
		if queued {
			queuedAt = &in.now
		}
		args = append(args, in.tenant, in.id, string(in.payload), in.now, queuedAt, in.trace, in.docType, in.docName, in.docEvent)
		written[k] = in.seq
		outs[i] = Added
		delete(isNew, k) // a repeat later in the batch is queued again
	}
	if len(args) > 0 {
		// Each row's id is its event's place in the acceptance order,
		// which its task carries.
		sql.WriteString(" RETURNING tenant, event_id, id")
		var ids []models.OutboxEvent
		if err := tx.Raw(sql.String(), args...).Scan(&ids).Error; err != nil {
			return nil, fmt.Errorf("write %d events to the outbox: %w", len(args)/9, err)
		}
		for _, r := range ids {
			if seq := written[eventKey{r.Tenant, r.EventID}]; seq != nil {
				*seq = r.ID
			}
		}
	}

	if len(again) == 0 {
		return outs, nil
	}
	// 3. IDs accepted before with another body are refused, and not queued
	// again. Only repeats pay for this read (published_events' primary key).
	if again, err = refuseChanged(tx, ins, outs, again); err != nil || len(again) == 0 {
		return outs, err
	}

	// 4. IDs accepted before: queued again when not fanned out yet.
	var requeued []models.OutboxEvent
	// Served by outbox_events_event (event_id).
	if err := tx.Raw("UPDATE outbox_events SET queued_at = NULL WHERE (tenant, event_id) IN ? RETURNING tenant, event_id", tuples(again)).Scan(&requeued).Error; err != nil {
		return nil, fmt.Errorf("queue %d events again: %w", len(again), err)
	}
	waiting := make(map[eventKey]bool, len(requeued))
	for _, r := range requeued {
		waiting[eventKey{r.Tenant, r.EventID}] = true
	}
	for i, in := range ins {
		if outs[i] == Repeated && waiting[in.key()] {
			outs[i] = Requeued
		}
	}
	return outs, nil
}

// refuseChanged marks Conflict each repeat in ins whose hash differs from the
// one recorded for its ID, and returns the repeats left (again without them).
// A key recorded without a hash is not compared.
//
// A "repeat" recorded with this very input's accept ID is this input's own
// write, committed by a transaction whose commit was answered with an error
// (the connection lost after the server committed: a failover) and then run
// again alone (groupcommit): it is Added, as its publisher was never told
// otherwise, and is queued by AddJSON like any new event.
func refuseChanged(tx *gorm.DB, ins []writeIn, outs []Outcome, again []eventKey) ([]eventKey, error) {
	var stored []models.PublishedEvent
	if err := tx.Select("tenant", "event_id", "body_hash", "accept_id").Where("(tenant, event_id) IN ?", tuples(again)).Find(&stored).Error; err != nil {
		return nil, fmt.Errorf("read %d events published before: %w", len(again), err)
	}
	recorded := make(map[eventKey]models.PublishedEvent, len(stored))
	for _, p := range stored {
		recorded[eventKey{p.Tenant, p.EventID}] = p
	}
	keep := make(map[eventKey]bool, len(again))
	for i, in := range ins {
		if outs[i] == Added {
			continue
		}
		p := recorded[in.key()]
		if p.BodyHash != "" && p.BodyHash != in.hash {
			outs[i] = Conflict
			continue
		}
		if in.accept != "" && p.AcceptID == in.accept {
			outs[i] = Added
			continue
		}
		keep[in.key()] = true
	}
	left := again[:0]
	for _, id := range again {
		if keep[id] {
			left = append(left, id)
		}
	}
	return left, nil
}
