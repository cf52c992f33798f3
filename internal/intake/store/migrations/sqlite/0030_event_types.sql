-- The doctype × event pairs each tenant has published (see the PostgreSQL
-- migration of the same number).
CREATE TABLE event_types (
    tenant     text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    doc_type   text NOT NULL,
    event      text NOT NULL,
    first_seen datetime NOT NULL,
    PRIMARY KEY (tenant, doc_type, event)
);
