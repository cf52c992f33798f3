-- PostgreSQL's webhooks_version lets workers cache webhooks. SQLite runs in
-- one process, where reading the webhooks is a function call and nothing is
-- cached: this migration only keeps the two version sequences alike.
SELECT 1;
