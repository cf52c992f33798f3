-- Which token made a portal link (issue 35, finding 7); see the PostgreSQL
-- migration of the same number for the reasons.
ALTER TABLE portal_links ADD COLUMN token_id text REFERENCES api_tokens (id) ON DELETE CASCADE;
UPDATE portal_links SET token_id = (SELECT id FROM api_tokens WHERE api_tokens.name = portal_links.created_by);
DELETE FROM portal_links WHERE token_id IS NULL;
CREATE INDEX portal_links_token ON portal_links (token_id);
CREATE INDEX portal_links_expires ON portal_links (expires_at);
