-- Endpoint health: when a webhook's deliveries started failing without a
-- success since (NULL while healthy).
ALTER TABLE webhooks ADD COLUMN failing_since datetime;
