-- Outage recovery (issue #14).
--
-- Endpoint health moves off the webhooks row: it changes with every flip of
-- a flapping receiver, and every change to webhooks moves webhooks_version
-- and empties every worker's webhook cache. webhook_health has one row per
-- webhook, made with it, and no trigger.
--   failing_since: the first failure since the last success (NULL while healthy)
--   failures:      failed attempts since the last success
--   probe_id:      while failing, the one delivery whose retry may be sent (the probe)
--   probe_at:      when that probe was chosen; the next one waits health.probe_interval
CREATE TABLE webhook_health (
    webhook_id    text PRIMARY KEY REFERENCES webhooks (id) ON DELETE CASCADE,
    failing_since timestamptz,
    failures      integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    probe_id      text,
    probe_at      timestamptz
);
INSERT INTO webhook_health (webhook_id, failing_since, failures)
    SELECT id, failing_since, CASE WHEN failing_since IS NULL THEN 0 ELSE 1 END FROM webhooks;

CREATE FUNCTION homing_webhook_health() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_health (webhook_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER webhooks_health AFTER INSERT ON webhooks
    FOR EACH ROW EXECUTE FUNCTION homing_webhook_health();

ALTER TABLE webhooks DROP COLUMN failing_since;

-- Requests per second across every worker; 0 is unlimited.
ALTER TABLE webhooks ADD COLUMN rate_limit integer NOT NULL DEFAULT 0 CHECK (rate_limit >= 0);

-- When a sweep queued this row's retry task: a sweep step skips rows queued
-- less than a lease ago, so a tick can keep taking batches without reading
-- the rows it has just queued again. A claim clears it.
ALTER TABLE deliveries ADD COLUMN queued_at timestamptz;

-- The sweep's step: per webhook, its due Failed rows by due time (a LATERAL
-- probe per webhook keeps one webhook's backlog from starving another's).
CREATE INDEX deliveries_due_webhook ON deliveries (webhook_id, next_retry) WHERE status = 'Failed';

-- A deleted webhook's pending retries are made final when it is deleted;
-- these were left by the old rule (Exhausted when they came due).
UPDATE deliveries SET status = 'Exhausted', next_retry = NULL, last_error = 'webhook deleted', updated_at = now()
    WHERE status = 'Failed' AND NOT EXISTS (SELECT 1 FROM webhooks w WHERE w.id = deliveries.webhook_id);

-- The sweep joins webhooks to a LATERAL read per webhook; a never-analyzed
-- webhooks table is costed as 10 pages of rows, which priced a step high
-- enough to be JIT-compiled (100+ ms a step). Statistics of the real size
-- keep it an index read.
ANALYZE webhooks;
ANALYZE webhook_health;
