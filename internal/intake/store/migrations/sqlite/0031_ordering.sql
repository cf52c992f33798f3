-- Ordered delivery per document (see the PostgreSQL migration of the same
-- number). SQLite keeps the columns so that one model reads both, but a
-- webhook there cannot be ordered: ordering 'document' needs PostgreSQL
-- (webhook.Validate refuses it), and no SQLite row has an accept_seq.
ALTER TABLE webhooks ADD COLUMN ordering text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'document'));
ALTER TABLE deliveries ADD COLUMN accept_seq bigint;
ALTER TABLE outbox_events ADD COLUMN doc_type text;
ALTER TABLE outbox_events ADD COLUMN doc_name text;
ALTER TABLE outbox_events ADD COLUMN doc_event text;
