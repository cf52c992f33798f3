-- Which write of homing serve recorded an event ID (outbox.Writer): a
-- transaction whose commit was answered with an error after the server had
-- committed it (a failover) is written again, and its own record must not
-- read as an earlier publish of the same ID (answered 200), but as its own
-- (202). Random per write; NULL for rows written before and by PublishTx.
ALTER TABLE published_events ADD COLUMN accept_id text;
