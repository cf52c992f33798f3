-- Transactional outbox (see the PostgreSQL migration). SQLite has no
-- LISTEN/NOTIFY: the relay polls.
CREATE TABLE outbox_events (
    id         integer PRIMARY KEY AUTOINCREMENT,
    event_id   text NOT NULL CHECK (event_id <> ''),
    payload    text NOT NULL,
    created_at datetime NOT NULL
);

CREATE TABLE published_events (
    event_id   text PRIMARY KEY CHECK (event_id <> ''),
    created_at datetime NOT NULL
);
CREATE INDEX published_events_created ON published_events (created_at);
