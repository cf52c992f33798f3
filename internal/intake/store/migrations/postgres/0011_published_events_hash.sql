-- The SHA-256 (hex) of the event a POST /v1/events accepted, so that a
-- repeat of its ID with another body is refused (409) instead of silently
-- answered as the original. '' for keys recorded before, and for events
-- published with client.PublishTx: those repeats are not compared.
ALTER TABLE published_events ADD COLUMN body_hash text NOT NULL DEFAULT '';
