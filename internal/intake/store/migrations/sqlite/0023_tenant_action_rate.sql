-- A tenant's action_rate (see the PostgreSQL migration of the same number).
ALTER TABLE tenants ADD COLUMN action_rate integer NOT NULL DEFAULT 0 CHECK (action_rate >= 0);
