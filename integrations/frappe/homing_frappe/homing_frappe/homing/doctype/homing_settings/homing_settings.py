# Frappe boilerplate: the doctype's controller. The logic is in core.py.

import frappe
from frappe.model.document import Document

from homing_frappe import core


class HomingSettings(Document):
	def validate(self):
		url = (self.homing_url or "").strip()
		if url and not (url.startswith("http://") or url.startswith("https://")):
			frappe.throw(f"Homing URL {url!r} must start with http:// or https://")
		self.homing_url = url.rstrip("/")
		for row in self.get("doctypes") or []:
			if row.document_type in core.OWN_DOCTYPES:
				frappe.throw(f"Row {row.idx}: {row.document_type} is this app's own doctype and is never published")
			try:
				core.parse_events(row.events)
			except ValueError as e:
				frappe.throw(f"Row {row.idx} ({row.document_type}): {e}")
		if self.get("tenant_from_site"):
			try:
				core.tenant_of_site(frappe.local.site)
			except ValueError as e:
				frappe.throw(str(e))
		if self.enabled and not (url and (self.token or self.get_password("token", raise_exception=False))):
			frappe.throw("Set the Homing URL and token before enabling")

	def on_update(self):
		# The request that saved the settings sees them at once.
		frappe.local.homing_settings = None
