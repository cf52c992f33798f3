CREATE TABLE webhooks (
    id                text PRIMARY KEY,
    name              text NOT NULL UNIQUE CHECK (name <> ''),
    doc_type          text NOT NULL CHECK (doc_type <> ''),
    doc_event         text NOT NULL CHECK (doc_event IN ('after_insert', 'on_update', 'on_submit', 'on_cancel', 'on_trash', 'on_update_after_submit', 'on_change', 'workflow_transition')),
    condition         text NOT NULL DEFAULT '',
    request_url       text NOT NULL,
    request_method    text NOT NULL DEFAULT 'POST' CHECK (request_method IN ('POST', 'PUT', 'PATCH', 'DELETE')),
    request_structure text NOT NULL DEFAULT 'json' CHECK (request_structure IN ('json', 'form')),
    body_template     text NOT NULL DEFAULT '',
    fields            text NOT NULL DEFAULT '[]',
    headers           text NOT NULL DEFAULT '{}',
    secret            text NOT NULL DEFAULT '',
    previous_secrets  text NOT NULL DEFAULT '[]',
    signature_scheme  text NOT NULL DEFAULT 'both' CHECK (signature_scheme IN ('both', 'standard', 'frappe', 'none')),
    enabled           boolean NOT NULL DEFAULT true,
    disabled_reason   text NOT NULL DEFAULT '',
    max_retries       integer NOT NULL CHECK (max_retries >= 0),
    queue             text NOT NULL DEFAULT 'default' CHECK (queue <> ''),
    timeout_ms        bigint NOT NULL CHECK (timeout_ms > 0),
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);

-- Fan-out: the enabled webhooks of one doctype and event.
CREATE INDEX webhooks_match ON webhooks (doc_type, doc_event) WHERE enabled;

CREATE TABLE deliveries (
    id               text PRIMARY KEY,
    webhook_id       text NOT NULL,
    webhook_name     text NOT NULL,
    event_id         text NOT NULL,
    doc_type         text NOT NULL,
    doc_name         text NOT NULL DEFAULT '',
    doc_event        text NOT NULL,
    method           text NOT NULL,
    url              text NOT NULL,
    headers          text NOT NULL DEFAULT '{}',
    payload          bytea NOT NULL,
    status           text NOT NULL CHECK (status IN ('Delivered', 'Failed', 'Exhausted')),
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_retries      integer NOT NULL CHECK (max_retries >= 0),
    next_retry       timestamptz,
    last_status_code integer,
    last_error       text NOT NULL DEFAULT '',
    last_response    text NOT NULL DEFAULT '',
    resent_from      text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    -- Failed always means a retry is scheduled, and nothing else has one.
    CONSTRAINT deliveries_failed_iff_next_retry CHECK ((status = 'Failed') = (next_retry IS NOT NULL)),
    -- One delivery per event and webhook: publishing an event twice never sends twice.
    CONSTRAINT deliveries_event_webhook UNIQUE (event_id, webhook_id)
);

-- The sweeper's one query: Failed rows by due time.
CREATE INDEX deliveries_due ON deliveries (next_retry) WHERE status = 'Failed';
-- Listing by webhook, newest first.
CREATE INDEX deliveries_webhook_created ON deliveries (webhook_name, created_at DESC);
-- Listing and retention by status and age.
CREATE INDEX deliveries_status_created ON deliveries (status, created_at);

CREATE TABLE delivery_attempts (
    id              bigserial PRIMARY KEY,
    delivery_id     text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    attempt         integer NOT NULL CHECK (attempt >= 1),
    at              timestamptz NOT NULL,
    method          text NOT NULL,
    url             text NOT NULL,
    request_headers text NOT NULL DEFAULT '{}',
    status_code     integer,
    duration_ms     bigint NOT NULL DEFAULT 0,
    class           text NOT NULL DEFAULT '',
    error           text NOT NULL DEFAULT '',
    response        text NOT NULL DEFAULT '',
    CONSTRAINT delivery_attempts_once UNIQUE (delivery_id, attempt)
);
