-- Outage recovery (see the PostgreSQL migration for what each part is for).
CREATE TABLE webhook_health (
    webhook_id    text PRIMARY KEY REFERENCES webhooks (id) ON DELETE CASCADE,
    failing_since datetime,
    failures      integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    probe_id      text,
    probe_at      datetime
);
INSERT INTO webhook_health (webhook_id, failing_since, failures)
    SELECT id, failing_since, CASE WHEN failing_since IS NULL THEN 0 ELSE 1 END FROM webhooks;

CREATE TRIGGER webhooks_health AFTER INSERT ON webhooks
BEGIN
    INSERT OR IGNORE INTO webhook_health (webhook_id) VALUES (NEW.id);
END;

CREATE TRIGGER webhooks_health_deleted AFTER DELETE ON webhooks
BEGIN
    DELETE FROM webhook_health WHERE webhook_id = OLD.id;
END;

ALTER TABLE webhooks DROP COLUMN failing_since;

ALTER TABLE webhooks ADD COLUMN rate_limit integer NOT NULL DEFAULT 0 CHECK (rate_limit >= 0);

ALTER TABLE deliveries ADD COLUMN queued_at datetime;

CREATE INDEX deliveries_due_webhook ON deliveries (webhook_id, next_retry) WHERE status = 'Failed';

UPDATE deliveries SET status = 'Exhausted', next_retry = NULL, last_error = 'webhook deleted', updated_at = CURRENT_TIMESTAMP
    WHERE status = 'Failed' AND NOT EXISTS (SELECT 1 FROM webhooks w WHERE w.id = deliveries.webhook_id);
