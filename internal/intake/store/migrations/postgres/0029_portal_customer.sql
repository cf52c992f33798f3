-- What a tenant's customers read in the portal, and what the operator lets
-- them set (issue 38, item 2).
--
-- A webhook's description, in its owner's words ("orders into the ERP"):
-- shown beside its name, never used to deliver.
ALTER TABLE webhooks ADD COLUMN description text NOT NULL DEFAULT '';
-- portal_advanced: the tenant's portal shows and sets the operator's
-- settings of a webhook (queue, compatibility, condition language, URL
-- template, redirects, signature scheme). Off, the portal's form leaves
-- them as they are.
ALTER TABLE tenants ADD COLUMN portal_advanced boolean NOT NULL DEFAULT false;
-- event_types: the "Doctype:event" pairs the operator declares the tenant
-- publishes, offered in the portal's event list beside those its deliveries
-- record; a JSON array.
ALTER TABLE tenants ADD COLUMN event_types text NOT NULL DEFAULT '[]';
