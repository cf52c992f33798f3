-- A tenant's theme (issue 38): what its portal shows its people instead of
-- "Homing". Empty is unset. The service checks every value with a message
-- saying what to fix (tenant.checkTheme); these checks hold the database to
-- the same shapes, which TestThemeRuleInSQLMatchesGo keeps equal.
ALTER TABLE tenants ADD COLUMN product_name text NOT NULL DEFAULT '' CHECK (char_length(product_name) <= 60);
ALTER TABLE tenants ADD COLUMN logo_url text NOT NULL DEFAULT '' CHECK (char_length(logo_url) <= 2048);
ALTER TABLE tenants ADD COLUMN accent_color text NOT NULL DEFAULT '' CHECK (accent_color = '' OR accent_color ~ '^#[0-9a-f]{6}$');
ALTER TABLE tenants ADD COLUMN support_url text NOT NULL DEFAULT '' CHECK (char_length(support_url) <= 2048);
