-- Transactional outbox: producers insert events here inside their own
-- transaction (client.PublishTx, POST /v1/events); a relay moves committed rows
-- into asynq and deletes them once the enqueue succeeded.
CREATE TABLE outbox_events (
    id         bigserial PRIMARY KEY,
    event_id   text NOT NULL CHECK (event_id <> ''),
    -- The webhook:event task payload, exactly as it will be queued.
    payload    text NOT NULL,
    created_at timestamptz NOT NULL
);

-- The idempotency record of events published through the outbox: an event ID
-- is accepted once, and a repeat is answered with the original.
CREATE TABLE published_events (
    event_id   text PRIMARY KEY CHECK (event_id <> ''),
    created_at timestamptz NOT NULL
);
-- Retention of old keys by age.
CREATE INDEX published_events_created ON published_events (created_at);

-- Wake the relay when an insert commits (notifications are delivered at
-- commit, and never for a rolled-back transaction). One per statement, with
-- an empty payload, so PostgreSQL folds a transaction's notifications into one.
CREATE FUNCTION homing_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('homing_outbox', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION homing_outbox_notify();
