-- Tenants (issue 26): one Homing serves many sites or customers. A tenant
-- is named by an immutable name (a-z, 0-9, '-', '_'; no rename), and that
-- name is the tenant column of every row that belongs to one: readable in
-- logs, headers and TaskIDs, and as stable as an id since it never changes.
-- Every install has the tenant 'default', and every row written before
-- tenants existed belongs to it.
CREATE TABLE tenants (
    name           text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    enabled        boolean NOT NULL DEFAULT true,
    -- Settings the next phases of issue 26 use; empty or 0 means unset.
    portal_origins text NOT NULL DEFAULT '[]',
    max_webhooks   integer NOT NULL DEFAULT 0 CHECK (max_webhooks >= 0),
    publish_rate   integer NOT NULL DEFAULT 0 CHECK (publish_rate >= 0),
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
INSERT INTO tenants (name, created_at, updated_at) VALUES ('default', now(), now());

-- Webhook names are unique per tenant.
ALTER TABLE webhooks ADD COLUMN tenant text NOT NULL DEFAULT 'default' REFERENCES tenants (name);
ALTER TABLE webhooks DROP CONSTRAINT webhooks_name_key;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_tenant_name UNIQUE (tenant, name);
-- Fan-out's read: served by (tenant, doc_type, doc_event) WHERE enabled.
DROP INDEX webhooks_match;
CREATE INDEX webhooks_match ON webhooks (tenant, doc_type, doc_event) WHERE enabled;

-- A delivery's tenant is its webhook's. deliveries_event_webhook stays
-- (event_id, webhook_id): a webhook id is unique across tenants and belongs
-- to one, so the key still allows one row per (event, webhook) and two
-- tenants' events with the same id never meet in it.
ALTER TABLE deliveries ADD COLUMN tenant text NOT NULL DEFAULT 'default';
CREATE INDEX deliveries_tenant_created ON deliveries (tenant, created_at DESC, id DESC);
ALTER TABLE delivery_attempts ADD COLUMN tenant text NOT NULL DEFAULT 'default';

-- Event ids are unique per tenant.
ALTER TABLE outbox_events ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE published_events ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE published_events DROP CONSTRAINT published_events_pkey;
ALTER TABLE published_events ADD PRIMARY KEY (tenant, event_id);

-- A token acts in its tenant; an operator token (operator) acts in
-- 'default' or in any tenant it names.
ALTER TABLE api_tokens ADD COLUMN tenant text NOT NULL DEFAULT 'default' REFERENCES tenants (name);
ALTER TABLE api_tokens ADD COLUMN operator boolean NOT NULL DEFAULT true;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_operator_default CHECK (NOT operator OR tenant = 'default');

-- Disabling a tenant changes which webhooks fan-out matches: the webhook
-- caches must see it.
CREATE TRIGGER tenants_updated AFTER UPDATE ON tenants
    FOR EACH ROW WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled) EXECUTE FUNCTION homing_webhooks_changed();
