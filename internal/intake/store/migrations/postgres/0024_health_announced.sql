-- Operational events (issue 37): the failing episode of a webhook that
-- Homing has announced with a `failing` event, by its failing_since; NULL
-- when none is announced. A webhook whose failures reach FailingAfter with
-- announced_since not its failing_since has a `failing` event to publish;
-- one whose announced_since is set and no longer its failing_since has a
-- `recovered` event to publish. Each is published in the transaction that
-- moves this column, so it happens once.
ALTER TABLE webhook_health ADD COLUMN announced_since timestamptz;
