-- Which write of homing serve recorded an event ID (see the PostgreSQL
-- migration of the same number).
ALTER TABLE published_events ADD COLUMN accept_id text;
