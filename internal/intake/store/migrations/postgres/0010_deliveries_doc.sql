-- Listing one doctype's or one document's deliveries newest first, page by
-- page (homing delivery list --doc-type T [--doc-name N], GET
-- /v1/deliveries?doc_type=T&doc_name=N): equality on the leading columns,
-- then the keyset (created_at, id) in listing order, with since/until as a
-- range on created_at.
CREATE INDEX deliveries_doc ON deliveries (doc_type, doc_name, created_at DESC, id DESC);
