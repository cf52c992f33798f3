-- Durable intake: an outbox row now stays until the worker's fan-out has
-- committed the event's deliveries, not merely until its task reached Redis,
-- so an event accepted by POST /v1/events or client.PublishTx survives the
-- loss of Redis's data. queued_at is when the relay last put the event's task
-- into Redis (NULL: not yet, or asked again by a republish); a row queued
-- longer ago than outbox.recover_after is queued again by the relay.
ALTER TABLE outbox_events ADD COLUMN queued_at timestamptz;

-- The relay's query for rows to queue, oldest first.
CREATE INDEX outbox_events_unqueued ON outbox_events (id) WHERE queued_at IS NULL;
-- The recoverer's query for rows queued long ago and never fanned out.
CREATE INDEX outbox_events_queued ON outbox_events (queued_at) WHERE queued_at IS NOT NULL;
-- The fan-out's delete, and a republish's re-queue, by event ID.
CREATE INDEX outbox_events_event ON outbox_events (event_id);

-- Wake the relay when a republish asks for an event to be queued again.
CREATE TRIGGER outbox_events_requeue_notify AFTER UPDATE OF queued_at ON outbox_events
    FOR EACH ROW WHEN (NEW.queued_at IS NULL) EXECUTE FUNCTION homing_outbox_notify();
