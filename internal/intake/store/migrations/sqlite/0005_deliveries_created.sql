-- Listing every delivery newest first, page by page (homing delivery list,
-- GET /v1/deliveries without filters): the keyset (created_at, id) without
-- a sort of the whole table per page.
CREATE INDEX deliveries_created ON deliveries (created_at DESC, id DESC);
