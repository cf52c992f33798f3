-- The queues besides 'default' a tenant's webhooks may be put on, as the
-- operator lists them (homing tenant update T --queues a,b; issue 35): a
-- JSON array, empty for every tenant until an operator gives it some.
ALTER TABLE tenants ADD COLUMN queues text NOT NULL DEFAULT '[]';
