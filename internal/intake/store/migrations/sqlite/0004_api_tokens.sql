-- Bearer tokens of the HTTP API (see the PostgreSQL migration).
CREATE TABLE api_tokens (
    id           text PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name <> ''),
    scope        text NOT NULL CHECK (scope IN ('publish', 'admin')),
    token_hash   text NOT NULL UNIQUE,
    created_at   datetime NOT NULL,
    last_used_at datetime
);
