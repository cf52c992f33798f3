-- Which token made a portal link (issue 35, finding 7): revoking a token
-- revokes the links it made. The foreign key does it in the statement that
-- deletes the token (homing token revoke, a tenant's delete), so no caller
-- can forget it: the link's row goes, and a signed link without its row
-- opens nothing and ends its sessions (portal.Links.Open: revoked). NULL for
-- a link made by no token.
ALTER TABLE portal_links ADD COLUMN token_id text REFERENCES api_tokens (id) ON DELETE CASCADE;
-- Links made before named their token by name only, which is unique among
-- live tokens; those whose token is already gone are revoked now.
UPDATE portal_links SET token_id = (SELECT id FROM api_tokens WHERE api_tokens.name = portal_links.created_by);
DELETE FROM portal_links WHERE token_id IS NULL;
-- The cascade's lookup when a token is deleted.
CREATE INDEX portal_links_token ON portal_links (token_id);
-- Retention's prune of expired links (retention.purgePortalLinks) and the
-- live links of GET /v1/portal-links walk expiry.
CREATE INDEX portal_links_expires ON portal_links (expires_at);
