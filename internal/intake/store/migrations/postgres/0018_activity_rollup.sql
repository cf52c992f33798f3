-- The console's 24-hour reads (the overview's day, the deliveries page's
-- chart, a webhook's success rate) counted the day's rows on every view: at
-- 10,000,000 deliveries (167,000 a day) 324-595 ms a page (docs/performance.md,
-- "Growth"). A closed hour never changes what it counts, so it is counted
-- once (inspect.rollHours, on the first read that needs it) and kept here;
-- only the hours not yet closed are read from the deliveries and attempts.
--
-- activity_rollup holds, per tenant, webhook and hour, the deliveries
-- created in the hour and the attempts made in it (2xx and not). Counts by
-- status are not kept: a delivery's status changes after its hour closed,
-- so the overview reads the Failed and Exhausted counts live and derives
-- Delivered from the hour's total.
CREATE TABLE activity_rollup (
    tenant       text NOT NULL,
    webhook_name text NOT NULL,
    hour         timestamptz NOT NULL,
    deliveries   bigint NOT NULL DEFAULT 0,
    attempts     bigint NOT NULL DEFAULT 0,
    succeeded    bigint NOT NULL DEFAULT 0,
    failed       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, webhook_name, hour)
);
-- One row per hour counted, whether or not it had any activity: a row here
-- says the hour's activity_rollup rows are complete. Inserting it first
-- (ON CONFLICT DO NOTHING) makes two readers that find the same hour missing
-- count it once: the second waits on the key and then skips it.
CREATE TABLE activity_rollup_hours (
    hour      timestamptz PRIMARY KEY,
    rolled_at timestamptz NOT NULL
);
