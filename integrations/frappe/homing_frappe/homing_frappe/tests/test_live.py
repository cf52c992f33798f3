"""core.py against a real Homing (opt-in; skipped unless HOMING_LIVE_URL and
HOMING_LIVE_TOKEN are set, so make test stays self-contained):

    bin/homing dev --api-addr 127.0.0.1:18788 &
    bin/homing token create --name erp          # scope publish
    bin/homing webhook create --name wf-down --doctype "Homing Live Failing" \\
        --event workflow_transition --url http://127.0.0.1:1/
    HOMING_LIVE_URL=http://127.0.0.1:18788 HOMING_LIVE_TOKEN=hmg_... \\
        python3 -m unittest homing_frappe.tests.test_live     # from the app's root

The webhook makes a workflow_transition of doctype "Homing Live Failing" fail
(connection refused), so Homing answers 502; without it that test is skipped.
The document size test assumes delivery.max_payload_bytes of 1 MiB (the
default).
"""

import http.server
import json
import os
import threading
import unittest
import urllib.request
import uuid

from homing_frappe import core
from homing_frappe.tests.test_core import Clock, MemoryStore

URL = os.environ.get("HOMING_LIVE_URL", "")
TOKEN = os.environ.get("HOMING_LIVE_TOKEN", "")


@unittest.skipUnless(URL and TOKEN, "set HOMING_LIVE_URL and HOMING_LIVE_TOKEN to run against a real Homing")
class AgainstHoming(unittest.TestCase):
	def settings(self, **kw):
		base = dict(url=URL, token=TOKEN, enabled=True, timeout=10, max_doc_bytes=4 << 20)
		base.update(kw)
		return core.Settings(**base)

	def shaped(self, doc=None, event="on_submit", doc_type="Sales Order", event_id=None):
		name = f"SO-{uuid.uuid4().hex[:8]}"
		doc = doc if doc is not None else {"name": name, "grand_total": 1500.0, "posting_date": "2026-12-03"}
		return core.shape_event(event_id or core.new_event_id("frappe:live-test"), doc_type, name, event, doc, 4 << 20)

	def push_one(self, body, **kw):
		store = MemoryStore()
		store.add("row", body)
		summary = core.push_due(store, self.settings(**kw), core.urllib_transport, Clock())
		return summary, store.rows.get("row")

	def test_accepted_then_repeated_then_conflict(self):
		s = self.shaped()
		summary, row = self.push_one(s.body)
		self.assertEqual(summary.sent, 1, row)
		# The same ID and body: 200, deleted; Homing delivers nothing twice.
		resp = core.post_event(self.settings(), s.body, core.urllib_transport, 10)
		self.assertEqual(resp.status, 200)
		summary, row = self.push_one(s.body)
		self.assertEqual(summary.sent, 1)
		# The same ID with another body: 409, Failed for good.
		other = self.shaped(event_id=s.event_id, doc={"name": s.doc_name, "grand_total": 1.0})
		summary, row = self.push_one(other.body)
		self.assertEqual(summary.failed, 1)
		self.assertEqual(row["code"], 409)
		self.assertIn("conflict", row["error"])

	def test_invalid_event_422(self):
		body = json.dumps({"id": core.new_event_id("frappe:live-test"), "doc_type": "Sales Order", "event": "validate", "doc": {"name": "X"}})
		summary, row = self.push_one(body)
		self.assertEqual(summary.failed, 1)
		self.assertEqual(row["code"], 422)

	def test_document_over_the_limit_413(self):
		s = self.shaped(doc={"name": "SO-BIG", "notes": "x" * (1048576 + 10)})
		self.assertIsNone(s.error, "the settings here allow it, Homing does not")
		summary, row = self.push_one(s.body)
		self.assertEqual(summary.failed, 1)
		self.assertEqual(row["code"], 413)
		# With Homing's limit in the settings, it never leaves the site.
		self.assertIn("413", core.shape_event("i", "D", "N", "on_update", {"notes": "x" * (1048576 + 10)}).error)

	def test_wrong_token_retries(self):
		summary, row = self.push_one(self.shaped().body, token="hmg_wrong")
		self.assertEqual(summary.retried, 1)
		self.assertEqual(row["code"], 401)

	def test_lost_answer(self):
		"""A proxy forwards the request to Homing, which accepts it, and drops
		the answer; the retry under the same ID is answered 200 and the event
		was accepted once."""
		answers = []

		class Dropper(http.server.BaseHTTPRequestHandler):
			def log_message(self, *a):
				pass

			def do_POST(self):
				body = self.rfile.read(int(self.headers["Content-Length"]))
				req = urllib.request.Request(URL.rstrip("/") + self.path, data=body, headers=dict(self.headers), method="POST")
				with urllib.request.urlopen(req, timeout=10) as r:
					answers.append(r.status)
				self.close_connection = True  # and say nothing

		server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dropper)
		t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
		t.start()
		try:
			s = self.shaped()
			store = MemoryStore()
			store.add("row", s.body)
			proxy = self.settings(url=f"http://127.0.0.1:{server.server_address[1]}")
			clock = Clock()
			summary = core.push_due(store, proxy, core.urllib_transport, clock)
			self.assertEqual(summary.retried, 1)
			self.assertEqual(answers, [202], "Homing accepted it; the site never heard")
			clock.advance(60)
			summary = core.push_due(store, self.settings(), core.urllib_transport, clock)
			self.assertEqual(summary.sent, 1)
			self.assertEqual(store.rows, {})
			self.assertEqual(core.post_event(self.settings(), s.body, core.urllib_transport, 10).status, 200)
		finally:
			server.shutdown()
			server.server_close()

	def test_workflow_transition(self):
		ok = self.shaped(event=core.WORKFLOW_TRANSITION, doc_type="Homing Live Nobody Listens")
		self.assertEqual(core.publish_now(self.settings(), ok, core.urllib_transport).status, 200)

	@unittest.skipUnless(os.environ.get("HOMING_LIVE_FAILING", "1") == "1", "")
	def test_workflow_transition_failure(self):
		bad = self.shaped(event=core.WORKFLOW_TRANSITION, doc_type="Homing Live Failing")
		try:
			core.publish_now(self.settings(), bad, core.urllib_transport)
		except core.PublishError as e:
			self.assertIn("wf-down", str(e))
		else:
			self.skipTest('no failing workflow_transition webhook for "Homing Live Failing" (see the module docstring)')


if __name__ == "__main__":
	unittest.main()
