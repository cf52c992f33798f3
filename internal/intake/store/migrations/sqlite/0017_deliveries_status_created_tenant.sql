-- The overview's counts filter by status, tenant and created_at: carry the
-- tenant in the status index so they stay index-only (the PostgreSQL
-- migration of the same number says why). SQLite has no INCLUDE; a third
-- key column covers the same.
CREATE INDEX IF NOT EXISTS deliveries_status_created_tenant ON deliveries (status, created_at, tenant);
DROP INDEX IF EXISTS deliveries_status_created;
