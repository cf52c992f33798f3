-- The overview's counts of the last hour and day (inspect.countSince) filter
-- by status, tenant and created_at. deliveries_status_created held status and
-- created_at only, so since tenants (0015) each count read every row of the
-- window from the table: 519 ms for a day's Delivered count at 10,000,000 rows
-- (docs/performance.md, "Growth"). With the tenant carried in the index the
-- counts are index-only again. Retention's and the status listing's ranges
-- (status, created_at) use it as before, and the table keeps the same number
-- of indexes, so an insert costs no more.
--
-- The build takes the table's write lock for as long as it runs (about a
-- second per million deliveries): run homing migrate with the workers stopped
-- on a large table, or build it beforehand with
--   CREATE INDEX CONCURRENTLY deliveries_status_created_tenant ON deliveries (status, created_at) INCLUDE (tenant);
-- and this migration then only drops the old index.
CREATE INDEX IF NOT EXISTS deliveries_status_created_tenant ON deliveries (status, created_at) INCLUDE (tenant);
DROP INDEX IF EXISTS deliveries_status_created;
