"""The seam to Frappe: the only module of homing_frappe that imports frappe.

It reads Homing Settings and the Homing Event Queue table, and hands them to
core.py, which decides everything. Kept thin on purpose: core.py is tested
without a site; this module is not (see README.md, "What was not run").

Frappe APIs used, and what this code assumes of them:

- doc_events handlers are called as handler(doc, method) from
  Document.run_method, inside the request's database transaction; a row
  inserted there commits or rolls back with the document.
- frappe.flags is request-local (frappe.local.flags); in_import, in_patch,
  in_install and in_migrate are the flags run_webhooks
  (frappe/integrations/doctype/webhook/__init__.py) returns early on.
- frappe.db.after_commit / after_rollback (CallbackManager, Frappe 15+) run
  once when the transaction ends; on older versions the dedupe lasts until
  the request ends, like frappe.flags.webhooks_executed did.
- workflow_methods tasks are called as task(doc) by apply_workflow
  (frappe/model/workflow.py) before the document is saved, in the same
  transaction ("will execute in the same transaction as the rest of the
  transition"): raising fails the transition.
"""

from __future__ import annotations

import json

import frappe
from frappe.utils import now_datetime

from homing_frappe import core

QUEUE = "Homing Event Queue"
SETTINGS = "Homing Settings"


# --- settings ---------------------------------------------------------------


def load_settings(with_token: bool = False) -> core.Settings:
	"""Homing Settings as core.Settings. Cached for the request (the token
	is read only when asked for)."""
	cached = getattr(frappe.local, "homing_settings", None)
	if cached is not None and (not with_token or cached.token):
		return cached
	doc = frappe.get_cached_doc(SETTINGS)
	published = {}
	for row in doc.get("doctypes") or []:
		if row.document_type:
			try:
				published[row.document_type] = core.parse_events(row.events)
			except ValueError:
				# Homing Settings.validate refuses this; a row that slipped
				# through publishes every event rather than none.
				published[row.document_type] = frozenset()
	s = core.Settings(
		url=(doc.homing_url or "").strip(),
		enabled=bool(doc.enabled),
		timeout=float(doc.timeout or 10),
		workflow_timeout=float(doc.workflow_timeout or 60),
		max_doc_bytes=int(doc.max_doc_bytes or core.DEFAULT_MAX_DOC_BYTES),
		backoff_base=float(doc.backoff_base or 30),
		backoff_max=float(doc.backoff_max or 3600),
		max_attempts=int(doc.max_attempts or 0),
		batch_size=int(doc.batch_size or 200),
		event_id_prefix=(doc.event_id_prefix or "").strip() or f"frappe:{frappe.local.site}",
		tenant=_tenant(doc),
		published=published,
	)
	if with_token:
		s.token = doc.get_password("token", raise_exception=False) or ""
	frappe.local.homing_settings = s
	return s


def _tenant(doc) -> str:
	"""The tenant events name: the site's (core.tenant_of_site) with Tenant
	from Site on, else none (the token's own). A site whose name cannot make
	a tenant name publishes under the raw name, which Homing refuses (422),
	so the rows fail visibly rather than land in another tenant; Homing
	Settings refuses to save that setting in the first place."""
	if not doc.get("tenant_from_site"):
		return ""
	try:
		return core.tenant_of_site(frappe.local.site)
	except ValueError:
		return frappe.local.site


# --- doc_events: write the event into the document's transaction ------------


def _dedupe() -> core.RequestDedupe:
	d = frappe.flags.homing_dedupe
	if d is None:
		d = frappe.flags.homing_dedupe = core.RequestDedupe()

		def forget():
			frappe.flags.homing_dedupe = None

		# Forget when the transaction ends, so that a job committing between
		# documents publishes each commit's changes.
		for name in ("after_commit", "after_rollback"):
			cb = getattr(frappe.db, name, None)
			if cb is not None and hasattr(cb, "add"):
				cb.add(forget)
	return d


def _doc_dict(doc) -> dict:
	# Exactly what Frappe's own webhooks and frappe.as_json make of a
	# document: dates as strings, decimals as numbers, child tables included.
	return json.loads(frappe.as_json(doc))


def _row_values(shaped: core.Shaped, now) -> dict:
	return {
		"status": core.FAILED if shaped.error else core.QUEUED,
		"event_id": shaped.event_id,
		"reference_doctype": shaped.doc_type,
		"reference_name": shaped.doc_name,
		"event": shaped.event,
		"body": shaped.body,
		"doc_bytes": shaped.doc_bytes,
		"attempts": 0,
		"next_attempt": now,
		"last_error": shaped.error,
		"last_status_code": None,
	}


def on_doc_event(doc, method=None):
	"""doc_events["*"] handler for every event Homing knows."""
	if core.skipped_by_flags(frappe.flags) or doc.doctype in core.OWN_DOCTYPES:
		return
	settings = load_settings()
	why = core.skip_reason(frappe.flags, doc.doctype, method, bool(doc.flags.in_insert), settings)
	if why:
		return
	dedupe = _dedupe()
	now = now_datetime()
	existing = dedupe.row_for(doc.doctype, doc.name, method)
	if existing and frappe.db.exists(QUEUE, existing):
		# The same document and event again in this transaction: keep one
		# row, with the document's last state (Frappe keeps the last
		# instance too), under the ID already given.
		event_id = frappe.db.get_value(QUEUE, existing, "event_id")
		shaped = core.shape_event(event_id, doc.doctype, doc.name, method, _doc_dict(doc), settings.max_doc_bytes, settings.tenant)
		frappe.db.set_value(QUEUE, existing, _row_values(shaped, now), update_modified=False)
	else:
		event_id = core.new_event_id(settings.event_id_prefix)
		shaped = core.shape_event(event_id, doc.doctype, doc.name, method, _doc_dict(doc), settings.max_doc_bytes, settings.tenant)
		row = frappe.get_doc({"doctype": QUEUE, **_row_values(shaped, now)})
		row.insert(ignore_permissions=True, ignore_links=True)
		dedupe.remember(doc.doctype, doc.name, method, row.name)
		existing = row.name
	if shaped.error:
		frappe.log_error(
			title=f"Homing: {doc.doctype} {doc.name} {method} cannot be published",
			message=shaped.error,
			reference_doctype=QUEUE,
			reference_name=existing,
		)


# --- the scheduled push -----------------------------------------------------


class FrappeStore:
	"""core.Store on the Homing Event Queue table; commits after each row so
	that a crash in the middle of a run repeats at most one request (which
	Homing answers 200 by its ID)."""

	def due(self, now, limit, after):
		filters = [["status", "=", core.QUEUED], ["next_attempt", "<=", now]]
		after = list(after)
		if after:
			filters.append(["name", "not in", after])
		rows = frappe.get_all(
			QUEUE,
			filters=filters,
			fields=["name", "event_id", "body", "attempts"],
			order_by="creation asc, name asc",
			limit_page_length=limit,
		)
		return [core.Row(r.name, r.event_id, r.body or "", int(r.attempts or 0)) for r in rows]

	def delete(self, row, decision):
		frappe.db.delete(QUEUE, {"name": row.name})
		frappe.db.commit()

	def _update(self, row, decision, status):
		frappe.db.set_value(
			QUEUE,
			row.name,
			{
				"status": status,
				"attempts": decision.attempts,
				"next_attempt": decision.next_attempt or now_datetime(),
				"last_attempt": now_datetime(),
				"last_status_code": decision.status_code,
				"last_error": decision.error,
			},
			update_modified=False,
		)

	def retry(self, row, decision):
		self._update(row, decision, core.QUEUED)
		frappe.db.commit()

	def fail(self, row, decision):
		self._update(row, decision, core.FAILED)
		frappe.log_error(
			title=f"Homing refused event {row.event_id}",
			message=decision.error,
			reference_doctype=QUEUE,
			reference_name=row.name,
		)
		frappe.db.commit()


def push_queued():
	"""scheduler_events cron "* * * * *": push what is due."""
	settings = load_settings(with_token=True)
	summary = core.push_due(FrappeStore(), settings, core.urllib_transport, now_datetime)
	if summary.halted and summary.retried:
		frappe.logger("homing_frappe").warning(f"Homing push stopped: {summary.halted}")
	return summary


# --- workflow_methods: a transition sent now --------------------------------


def send_workflow_transition(doc):
	"""workflow_methods task "Send to Homing": called by apply_workflow as
	task(doc), before the document is saved and in its transaction. Posts
	workflow_transition and waits for Homing's answer; anything but 200
	raises, which fails the transition."""
	settings = load_settings(with_token=True)
	if not settings.enabled:
		return
	shaped = core.shape_event(
		core.new_event_id(settings.event_id_prefix),
		doc.doctype,
		doc.name,
		core.WORKFLOW_TRANSITION,
		_doc_dict(doc),
		settings.max_doc_bytes,
		settings.tenant,
	)
	try:
		core.publish_now(settings, shaped, core.urllib_transport)
	except core.PublishError as e:
		frappe.throw(str(e), title="Workflow transition not delivered")


# --- operator actions -------------------------------------------------------


@frappe.whitelist()
def requeue(names):
	"""Queue Failed rows again, from their first attempt (list view action)."""
	frappe.only_for("System Manager")
	if isinstance(names, str):
		names = frappe.parse_json(names)
	now = now_datetime()
	n = 0
	for name in names or []:
		row = frappe.db.get_value(QUEUE, name, ["status", "body"], as_dict=True)
		# A row kept without its body (a document over the size limit) can
		# never be sent: it stays Failed.
		if row and row.status == core.FAILED and row.body:
			frappe.db.set_value(
				QUEUE,
				name,
				{"status": core.QUEUED, "attempts": 0, "next_attempt": now},
				update_modified=False,
			)
			n += 1
	return n


@frappe.whitelist()
def push_now():
	"""Run one push at once (Homing Settings button)."""
	frappe.only_for("System Manager")
	s = push_queued()
	return {"sent": s.sent, "retried": s.retried, "failed": s.failed, "halted": s.halted, "skipped": s.skipped}
