-- Portal links (issue 26 part 3): a link lets a tenant's own people into
-- the tenant's pages for a while. The link's token is signed (an HMAC of a
-- key derived from secrets.key) and carries its id, tenant and expiry; this
-- row is what makes it revocable: a link whose row is gone or revoked opens
-- nothing, and the sessions it started end at their next request.
CREATE TABLE portal_links (
    id         text PRIMARY KEY,
    tenant     text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
-- A tenant's links, for revoking them all with the tenant.
CREATE INDEX portal_links_tenant ON portal_links (tenant);
