-- A tenant's theme (see the PostgreSQL migration of the same number).
ALTER TABLE tenants ADD COLUMN product_name text NOT NULL DEFAULT '' CHECK (length(product_name) <= 60);
ALTER TABLE tenants ADD COLUMN logo_url text NOT NULL DEFAULT '' CHECK (length(logo_url) <= 2048);
ALTER TABLE tenants ADD COLUMN accent_color text NOT NULL DEFAULT '' CHECK (accent_color = '' OR (length(accent_color) = 7 AND accent_color GLOB '#[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'));
ALTER TABLE tenants ADD COLUMN support_url text NOT NULL DEFAULT '' CHECK (length(support_url) <= 2048);
