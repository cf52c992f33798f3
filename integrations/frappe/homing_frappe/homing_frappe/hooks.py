app_name = "homing_frappe"
app_title = "Homing"
app_publisher = "Homing"
app_description = "Publish document events to Homing without losing any"
app_email = "homing@example.com"
app_license = "MIT"
required_apps = ["frappe"]

# Every document event Homing knows (Homing's models.DocEvents), for every
# doctype: Homing Settings chooses which doctypes (and events) are queued.
# The handler writes a queue row inside the document's transaction.
_publish = "homing_frappe.frappe_glue.on_doc_event"
doc_events = {
	"*": {
		"after_insert": _publish,
		"on_update": _publish,
		"on_submit": _publish,
		"on_cancel": _publish,
		"on_trash": _publish,
		"on_update_after_submit": _publish,
		"on_change": _publish,
	}
}

# Push what is queued every minute.
scheduler_events = {
	"cron": {
		"* * * * *": ["homing_frappe.frappe_glue.push_queued"],
	}
}

# A Workflow Transition Task "Send to Homing": posts workflow_transition
# synchronously and fails the transition when Homing does not deliver it.
# apply_workflow (frappe/model/workflow.py) looks tasks up by "name" and calls
# "method" as method(doc).
workflow_methods = [
	{"name": "Send to Homing", "method": "homing_frappe.frappe_glue.send_workflow_transition"},
]
