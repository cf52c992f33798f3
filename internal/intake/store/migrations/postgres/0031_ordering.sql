-- Ordered delivery per document (issue 39). A webhook with ordering
-- 'document' sends the deliveries of one (tenant, webhook, doc_type,
-- doc_name) key in the order their events were accepted; 'none' (the
-- default) is the behaviour before this migration, unchanged.
ALTER TABLE webhooks ADD COLUMN ordering text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'document'));

-- A delivery's place in its key: the outbox_events id of its event (the
-- durable intake's acceptance order), or a value drawn from the same
-- sequence at fan-out for an event queued straight into Redis. NULL for a
-- delivery of an unordered webhook, which no ordering rule reads.
ALTER TABLE deliveries ADD COLUMN accept_seq bigint;

-- The ordering rule's one lookup: the non-final deliveries of a key ahead
-- of a given one (the claim's block, the wake, waits_for).
CREATE INDEX deliveries_order ON deliveries (tenant, webhook_id, doc_type, doc_name, accept_seq)
    WHERE status = 'Failed' AND accept_seq IS NOT NULL;

-- An event accepted but not fanned out yet holds the ordered deliveries of
-- its document accepted after it: its outbox row names the document.
ALTER TABLE outbox_events ADD COLUMN doc_type text;
ALTER TABLE outbox_events ADD COLUMN doc_name text;
ALTER TABLE outbox_events ADD COLUMN doc_event text;
CREATE INDEX outbox_events_doc ON outbox_events (tenant, doc_type, doc_name, id) WHERE doc_type IS NOT NULL;
