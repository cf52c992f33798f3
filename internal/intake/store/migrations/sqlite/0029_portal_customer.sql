-- What a tenant's customers read in the portal, and what the operator lets
-- them set (see the PostgreSQL migration of the same number).
ALTER TABLE webhooks ADD COLUMN description text NOT NULL DEFAULT '';
ALTER TABLE tenants ADD COLUMN portal_advanced boolean NOT NULL DEFAULT false;
ALTER TABLE tenants ADD COLUMN event_types text NOT NULL DEFAULT '[]';
