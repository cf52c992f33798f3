-- The delivery console's reads (issue 17), indexed so that every page
-- answers in under 200 ms at 1,000,000 deliveries (docs/performance.md,
-- "Console (issue 17)").
--
-- A webhook's success rate over the last 24 hours (inspect.WebhookSuccessRate):
-- the attempts of the window, then each one's delivery by primary key.
CREATE INDEX delivery_attempts_at ON delivery_attempts (at);
-- A webhook's last error (inspect.LastError, the overview and the webhook
-- page): its newest delivery that has one, without walking past every
-- Delivered row after it.
CREATE INDEX deliveries_webhook_error ON deliveries (webhook_name, created_at DESC) WHERE last_error <> '';
-- One webhook's deliveries of one status, newest first, page by page
-- (/console/deliveries?webhook=W&status=S, GET /v1/deliveries likewise):
-- equality on both leading columns, then the keyset in listing order.
CREATE INDEX deliveries_webhook_status_created ON deliveries (webhook_name, status, created_at DESC, id DESC);
