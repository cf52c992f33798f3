-- Operational events (issue 37): a webhook of doctype 'Homing Webhook'
-- listens to Homing's own events (failing, recovered, disabled, exhausted);
-- every other webhook to a document event, as before.
ALTER TABLE webhooks DROP CONSTRAINT webhooks_doc_event_check;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_doc_event_check CHECK (
    doc_event IN ('after_insert', 'on_update', 'on_submit', 'on_cancel', 'on_trash', 'on_update_after_submit', 'on_change', 'workflow_transition')
    OR (doc_type = 'Homing Webhook' AND doc_event IN ('failing', 'recovered', 'disabled', 'exhausted')));
