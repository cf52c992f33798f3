# Frappe boilerplate: the child table's controller.

from frappe.model.document import Document


class HomingPublishedDocType(Document):
	pass
