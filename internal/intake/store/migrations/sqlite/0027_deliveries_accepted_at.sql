-- The latency users feel (issue 37): when a delivery's event was accepted
-- (its 202, PublishTx's commit, Publish's enqueue), carried by its task's
-- homing-accepted-at header; NULL for deliveries of tasks without it, whose
-- created_at (the fan-out) is the nearest.
ALTER TABLE deliveries ADD COLUMN accepted_at datetime;
