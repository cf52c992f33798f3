-- Operational events (see the PostgreSQL migration of the same number).
-- SQLite cannot change a CHECK constraint, so webhooks is rebuilt;
-- webhook_health is kept aside because dropping webhooks cascades to it.
CREATE TABLE webhook_health_keep AS SELECT * FROM webhook_health;
CREATE TABLE webhooks_new (
    id                text PRIMARY KEY,
    tenant            text NOT NULL DEFAULT 'default' REFERENCES tenants (name),
    name              text NOT NULL CHECK (name <> ''),
    doc_type          text NOT NULL CHECK (doc_type <> ''),
    doc_event         text NOT NULL CHECK (doc_event IN ('after_insert', 'on_update', 'on_submit', 'on_cancel', 'on_trash', 'on_update_after_submit', 'on_change', 'workflow_transition')
        OR (doc_type = 'Homing Webhook' AND doc_event IN ('failing', 'recovered', 'disabled', 'exhausted'))),
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
    enabled           boolean NOT NULL DEFAULT 1,
    disabled_reason   text NOT NULL DEFAULT '',
    max_retries       integer NOT NULL CHECK (max_retries >= 0),
    queue             text NOT NULL DEFAULT 'default' CHECK (queue <> ''),
    timeout_ms        bigint NOT NULL CHECK (timeout_ms > 0),
    created_at        datetime NOT NULL,
    updated_at        datetime NOT NULL,
    rate_limit        integer NOT NULL DEFAULT 0 CHECK (rate_limit >= 0),
    follow_redirects  integer NOT NULL DEFAULT 0 CHECK (follow_redirects BETWEEN 0 AND 30),
    url_template      text NOT NULL DEFAULT '',
    compat            text NOT NULL DEFAULT '' CHECK (compat IN ('', 'frappe')),
    condition_language text NOT NULL DEFAULT 'expr' CHECK (condition_language IN ('', 'expr', 'python')),
    CONSTRAINT webhooks_tenant_name UNIQUE (tenant, name)
);
INSERT INTO webhooks_new (id, tenant, name, doc_type, doc_event, condition, request_url, request_method, request_structure,
        body_template, fields, headers, secret, previous_secrets, signature_scheme, enabled, disabled_reason, max_retries,
        queue, timeout_ms, created_at, updated_at, rate_limit, follow_redirects, url_template, compat, condition_language)
    SELECT id, tenant, name, doc_type, doc_event, condition, request_url, request_method, request_structure,
        body_template, fields, headers, secret, previous_secrets, signature_scheme, enabled, disabled_reason, max_retries,
        queue, timeout_ms, created_at, updated_at, rate_limit, follow_redirects, url_template, compat, condition_language
    FROM webhooks;
DROP TABLE webhooks;
ALTER TABLE webhooks_new RENAME TO webhooks;
CREATE INDEX webhooks_match ON webhooks (tenant, doc_type, doc_event) WHERE enabled = 1;
CREATE TRIGGER webhooks_health AFTER INSERT ON webhooks
BEGIN
    INSERT OR IGNORE INTO webhook_health (webhook_id) VALUES (NEW.id);
END;
CREATE TRIGGER webhooks_health_deleted AFTER DELETE ON webhooks
BEGIN
    DELETE FROM webhook_health WHERE webhook_id = OLD.id;
END;
INSERT OR REPLACE INTO webhook_health SELECT * FROM webhook_health_keep;
DROP TABLE webhook_health_keep;
