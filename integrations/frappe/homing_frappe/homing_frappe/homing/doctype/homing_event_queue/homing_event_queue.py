# Frappe boilerplate: the queue's controller. The queue's state machine is in
# core.py; rows are written by frappe_glue.on_doc_event and pushed by
# frappe_glue.push_queued.

import frappe
from frappe.model.document import Document


class HomingEventQueue(Document):
	pass


def on_doctype_update():
	# The push reads due rows: status = Queued and next_attempt <= now.
	frappe.db.add_index("Homing Event Queue", ["status", "next_attempt"])
