-- The doctype × event pairs each tenant has published (issue 38): the
-- portal's event list offers them. Written once per pair by the worker
-- that fans out its first event (tenant.EventTypes), whether or not a
-- webhook matched it; deleted with the tenant.
CREATE TABLE event_types (
    tenant     text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    doc_type   text NOT NULL,
    event      text NOT NULL,
    first_seen timestamptz NOT NULL,
    PRIMARY KEY (tenant, doc_type, event)
);
