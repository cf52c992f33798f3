-- Durable intake (see the PostgreSQL migration): an outbox row stays until
-- the event's fan-out has committed.
ALTER TABLE outbox_events ADD COLUMN queued_at datetime;

CREATE INDEX outbox_events_unqueued ON outbox_events (id) WHERE queued_at IS NULL;
CREATE INDEX outbox_events_queued ON outbox_events (queued_at) WHERE queued_at IS NOT NULL;
CREATE INDEX outbox_events_event ON outbox_events (event_id);
