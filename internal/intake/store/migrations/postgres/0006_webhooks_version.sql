-- A counter every change to webhooks moves: a worker caches each event
-- type's webhooks, and its fan-out INSERT writes the rows only while this
-- still reads the version the cache was filled at (internal/engine/dispatch/storage hookCache), so
-- an event never goes out under a webhook definition older than its INSERT.
CREATE TABLE webhooks_version (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n   bigint NOT NULL
);
INSERT INTO webhooks_version (one, n) VALUES (true, 1);

CREATE FUNCTION homing_webhooks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE webhooks_version SET n = n + 1;
    RETURN NULL;
END
$$;
-- Per changed row, so that an UPDATE that changes nothing (a health update
-- whose guard did not match) moves nothing; TRUNCATE has no rows.
CREATE TRIGGER webhooks_changed AFTER INSERT OR DELETE ON webhooks
    FOR EACH ROW EXECUTE FUNCTION homing_webhooks_changed();
CREATE TRIGGER webhooks_updated AFTER UPDATE ON webhooks
    FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION homing_webhooks_changed();
CREATE TRIGGER webhooks_truncated AFTER TRUNCATE ON webhooks
    FOR EACH STATEMENT EXECUTE FUNCTION homing_webhooks_changed();
