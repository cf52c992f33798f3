-- Portal links (issue 26 part 3); see the PostgreSQL migration of the same
-- number for the reasons.
CREATE TABLE portal_links (
    id         text PRIMARY KEY,
    tenant     text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    created_by text NOT NULL DEFAULT '',
    created_at datetime NOT NULL,
    expires_at datetime NOT NULL,
    revoked_at datetime
);
CREATE INDEX portal_links_tenant ON portal_links (tenant);
