-- Operational events (see the PostgreSQL migration of the same number).
ALTER TABLE webhook_health ADD COLUMN announced_since datetime;
