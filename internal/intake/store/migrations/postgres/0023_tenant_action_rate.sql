-- A tenant's action_rate (issue 35): at most this many resends, retries,
-- recovers and test sends a second through serve (the API, the console and
-- the portal), one Redis budget for every serve; 0 is no limit, as
-- publish_rate's.
ALTER TABLE tenants ADD COLUMN action_rate integer NOT NULL DEFAULT 0 CHECK (action_rate >= 0);
