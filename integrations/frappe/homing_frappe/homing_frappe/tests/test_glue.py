"""frappe_glue.py's code paths, on fake_frappe (a stand-in for the frappe
APIs the glue calls, not Frappe itself): the queue row written in the
document's transaction and gone with its rollback, the skip flags, one row
per (document, event) per transaction with the last state, oversized
documents kept as Failed and logged, the push deleting only after a 2xx, and
the workflow task failing the transition."""

import datetime as dt
import importlib
import json
import unittest

from homing_frappe import core
from homing_frappe.tests import fake_frappe
from homing_frappe.tests.test_core import T0, Clock
from homing_frappe.tests.test_http import TOKEN, ServerMixin

QUEUE = "Homing Event Queue"


class GlueCase(unittest.TestCase):
	settings_values = {
		"enabled": 1,
		"homing_url": "http://127.0.0.1:9",
		"token": TOKEN,
		"doctypes": [{"document_type": "Sales Order", "events": ""}, {"document_type": "ToDo", "events": "on_update"}],
	}

	def setUp(self):
		self.clock = Clock()
		self.frappe = fake_frappe.install(dict(self.settings_values), now=self.clock)
		self.glue = importlib.import_module("homing_frappe.frappe_glue")

	def tearDown(self):
		fake_frappe.uninstall()

	def rows(self):
		return list(self.frappe.db.table(QUEUE).values())

	def save(self, doc, *events):
		for e in events:
			self.glue.on_doc_event(doc, e)


class DocEvents(GlueCase):
	def test_row_commits_with_the_document(self):
		so = fake_frappe.Document("Sales Order", "SO-1", grand_total=1500.0)
		self.save(so, "on_update", "on_submit")
		self.frappe.db.commit()
		rows = self.rows()
		self.assertEqual([(r["event"], r["status"]) for r in rows], [("on_update", "Queued"), ("on_submit", "Queued")])
		body = json.loads(rows[1]["body"])
		self.assertEqual(body["id"], rows[1]["event_id"])
		self.assertTrue(body["id"].startswith("frappe:erp.example.com:"))
		self.assertEqual((body["doc_type"], body["doc_name"], body["event"]), ("Sales Order", "SO-1", "on_submit"))
		self.assertEqual(body["doc"]["grand_total"], 1500.0)
		self.assertEqual(rows[1]["next_attempt"], T0)

	def test_rolled_back_document_emits_nothing(self):
		so = fake_frappe.Document("Sales Order", "SO-1")
		self.save(so, "on_submit")
		self.frappe.db.rollback()
		self.assertEqual(self.rows(), [])
		# The dedupe was forgotten with the transaction: saving again queues.
		self.save(so, "on_submit")
		self.frappe.db.commit()
		self.assertEqual(len(self.rows()), 1)

	def test_skip_flags(self):
		for flag in ("in_import", "in_patch", "in_install", "in_migrate"):
			self.frappe.flags.clear()
			self.frappe.flags[flag] = True
			self.save(fake_frappe.Document("Sales Order", "SO-1"), "on_submit")
		self.assertEqual(self.rows(), [])

	def test_flags_checked_before_settings_are_read(self):
		# During bench install-app / migrate the settings may not exist yet.
		def missing(doctype):
			raise AssertionError("settings read")

		self.frappe.get_cached_doc = missing
		self.frappe.flags.in_install = True
		self.save(fake_frappe.Document("Sales Order", "SO-1"), "on_update")
		self.frappe.flags.clear()
		self.frappe.flags.in_migrate = True
		self.save(fake_frappe.Document("Homing Settings", "Homing Settings"), "on_update")
		self.assertEqual(self.rows(), [])

	def test_on_change_skipped_while_inserting(self):
		so = fake_frappe.Document("Sales Order", "SO-1")
		so.flags.in_insert = True
		self.save(so, "after_insert", "on_update", "on_change")
		self.assertEqual([r["event"] for r in self.rows()], ["after_insert", "on_update"])

	def test_unpublished_doctype_and_event(self):
		self.save(fake_frappe.Document("Item", "I-1"), "on_update")
		self.save(fake_frappe.Document("ToDo", "T-1"), "after_insert", "on_update")
		self.assertEqual([(r["reference_doctype"], r["event"]) for r in self.rows()], [("ToDo", "on_update")])

	def test_once_per_document_and_event_per_transaction_with_the_last_state(self):
		so = fake_frappe.Document("Sales Order", "SO-1", status="Draft")
		self.save(so, "on_update")
		so["status"] = "To Deliver"
		self.save(so, "on_update")
		self.frappe.db.commit()
		rows = self.rows()
		self.assertEqual(len(rows), 1)
		self.assertEqual(json.loads(rows[0]["body"])["doc"]["status"], "To Deliver")
		first_id = rows[0]["event_id"]
		# The next transaction is another event, under another ID.
		self.save(so, "on_update")
		self.frappe.db.commit()
		ids = [r["event_id"] for r in self.rows()]
		self.assertEqual(len(ids), 2)
		self.assertEqual(ids[0], first_id)
		self.assertNotEqual(ids[0], ids[1])

	def test_oversized_document_is_kept_failed_and_logged(self):
		so = fake_frappe.Document("Sales Order", "SO-BIG", notes="x" * 2_000_000)
		self.save(so, "on_submit")
		self.frappe.db.commit()
		(row,) = self.rows()
		self.assertEqual(row["status"], "Failed")
		self.assertEqual(row["body"], "")
		self.assertIn("more than Homing's delivery.max_payload_bytes (1048576)", row["last_error"])
		self.assertEqual(self.frappe.error_log[0].reference_name, row["name"])

	def test_disabled_queues_nothing(self):
		self.frappe.local.homing_settings = core.Settings(enabled=False)
		self.save(fake_frappe.Document("Sales Order", "SO-1"), "on_submit")
		self.assertEqual(self.rows(), [])


class PushAndWorkflow(ServerMixin, unittest.TestCase):
	"""The glue's push and workflow task against the fake Homing server."""

	def setUp(self):
		super().setUp()
		self.frappe = fake_frappe.install(
			{"enabled": 1, "homing_url": self.url, "token": TOKEN, "doctypes": [{"document_type": "Sales Order"}]},
			now=self.clock,
		)
		self.glue = importlib.import_module("homing_frappe.frappe_glue")

	def tearDown(self):
		fake_frappe.uninstall()
		super().tearDown()

	def rows(self):
		return list(self.frappe.db.table(QUEUE).values())

	def test_push_deletes_only_after_2xx(self):
		for name in ("SO-1", "SO-2", "SO-3"):
			self.glue.on_doc_event(fake_frappe.Document("Sales Order", name), "on_submit")
		self.frappe.db.commit()
		self.homing.plan = [None, "500"]
		s = self.glue.push_queued()
		self.assertEqual((s.sent, s.retried), (1, 1))
		self.assertEqual([(r["reference_name"], r["attempts"], r["last_status_code"]) for r in self.rows()], [("SO-2", 1, 500), ("SO-3", 0, None)])
		self.assertEqual(self.rows()[0]["next_attempt"], T0 + dt.timedelta(seconds=30))
		# A crash now loses nothing: every change was committed.
		self.frappe.db.rollback()
		self.assertEqual(len(self.rows()), 2)
		self.clock.advance(60)
		self.assertEqual(self.glue.push_queued().sent, 2)
		self.assertEqual(self.rows(), [])
		self.assertEqual(len(self.homing.accepted), 3)

	def test_refused_row_is_failed_and_logged(self):
		self.glue.on_doc_event(fake_frappe.Document("Sales Order", "SO-1"), "on_submit")
		self.frappe.db.commit()
		(row,) = self.rows()
		self.homing.accepted[row["event_id"]] = "another body"
		s = self.glue.push_queued()
		self.assertEqual(s.failed, 1)
		(row,) = self.rows()
		self.assertEqual((row["status"], row["last_status_code"]), ("Failed", 409))
		self.assertIn("Homing refused event", self.frappe.error_log[0].title)
		# An operator may queue it again; it goes out on the next run.
		self.assertEqual(self.glue.requeue([row["name"]]), 1)
		self.assertEqual(self.rows()[0]["status"], "Queued")

	def test_workflow_transition_task(self):
		la = fake_frappe.Document("Leave Application", "LA-1", workflow_state="Approved")
		self.glue.send_workflow_transition(la)
		_, _, body = self.homing.requests[-1]
		self.assertEqual(json.loads(body)["event"], "workflow_transition")
		self.assertEqual(self.rows(), [], "a workflow transition is not queued")
		self.homing.workflow_failures = [{"webhook": "hr", "delivery_id": "d", "error": "HTTP 500"}]
		with self.assertRaisesRegex(fake_frappe.FrappeError, "hr: HTTP 500"):
			self.glue.send_workflow_transition(la)


class TenantFromSite(ServerMixin, unittest.TestCase):
	"""Tenant from Site on: every event Homing receives names the site's
	tenant, queued or workflow; off, none does (the token's own)."""

	def install(self, tenant_from_site):
		self.clock = Clock()
		self.frappe = fake_frappe.install(
			{"enabled": 1, "homing_url": self.url, "token": TOKEN, "tenant_from_site": tenant_from_site, "doctypes": [{"document_type": "Sales Order"}]},
			site="erp.example.com",
			now=self.clock,
		)
		self.addCleanup(fake_frappe.uninstall)
		return importlib.import_module("homing_frappe.frappe_glue")

	def test_events_name_the_sites_tenant(self):
		glue = self.install(1)
		glue.on_doc_event(fake_frappe.Document("Sales Order", "SO-1"), "on_submit")
		self.frappe.db.commit()
		self.assertEqual(glue.push_queued().sent, 1)
		_, _, body = self.homing.requests[-1]
		self.assertEqual(json.loads(body)["tenant"], "erp-example-com")
		glue.send_workflow_transition(fake_frappe.Document("Sales Order", "SO-2"))
		_, _, body = self.homing.requests[-1]
		self.assertEqual((json.loads(body)["tenant"], json.loads(body)["event"]), ("erp-example-com", "workflow_transition"))

	def test_off_names_no_tenant(self):
		glue = self.install(0)
		glue.on_doc_event(fake_frappe.Document("Sales Order", "SO-1"), "on_submit")
		self.frappe.db.commit()
		self.assertEqual(glue.push_queued().sent, 1)
		_, _, body = self.homing.requests[-1]
		self.assertNotIn("tenant", json.loads(body))


if __name__ == "__main__":
	unittest.main()
