-- Bearer tokens of the HTTP API (homing token create). Only the SHA-256 of a
-- token is kept: tokens are 32 random bytes, so a fast hash is enough, and a
-- stolen table holds nothing that authenticates.
CREATE TABLE api_tokens (
    id           text PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name <> ''),
    scope        text NOT NULL CHECK (scope IN ('publish', 'admin')),
    -- Every request looks its token up here, through this unique index.
    token_hash   text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz
);
