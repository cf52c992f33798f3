-- Frappe compatibility, per webhook (issue 18):
-- follow_redirects is how many redirects a delivery follows (0: none, the
-- answer is a 3xx failure); url_template, when not '', is a Jinja URL
-- rendered with the document per event (Frappe's is_dynamic_url); compat
-- 'frappe' sends bodies as frappe.as_json makes them; condition_language
-- says how condition is read ('expr', also written '', or 'python').
ALTER TABLE webhooks ADD COLUMN follow_redirects integer NOT NULL DEFAULT 0 CHECK (follow_redirects BETWEEN 0 AND 30);
ALTER TABLE webhooks ADD COLUMN url_template text NOT NULL DEFAULT '';
ALTER TABLE webhooks ADD COLUMN compat text NOT NULL DEFAULT '' CHECK (compat IN ('', 'frappe'));
ALTER TABLE webhooks ADD COLUMN condition_language text NOT NULL DEFAULT 'expr' CHECK (condition_language IN ('', 'expr', 'python'));
