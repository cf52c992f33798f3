-- url_doc is the document a delivery of a webhook with a url_template was
-- made from (issue 18), kept so that each retry renders the webhook's current
-- URL template with it: an operator who fixes a template fixes the retries
-- still due. NULL for every other delivery.
ALTER TABLE deliveries ADD COLUMN url_doc text;
