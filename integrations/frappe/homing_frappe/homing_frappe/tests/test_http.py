"""core.py against a real HTTP server on 127.0.0.1 that plays Homing's
POST /v1/events (internal/ops/api/events.go and README "Publishing over HTTP"): bearer
token, 202 for a new ID, 200 for the same ID and body again, 409 for the same
ID with another body, 422 for an invalid event, 413 for a document over the
limit, 502 delivery_failed for a workflow_transition; plus what a network
does: 500, a dropped connection after the event was accepted (the lost
answer), a redirect, no answer in time, and connection refused.

The time the queue sees is an injected clock; nothing sleeps.
"""

import datetime as dt
import hashlib
import http.server
import json
import socket
import threading
import unittest

from homing_frappe import core
from homing_frappe.tests.test_core import T0, Clock, MemoryStore

TOKEN = "hmg_test_token"
EVENTS = set(core.DOC_EVENTS) | {core.WORKFLOW_TRANSITION}


class FakeHoming:
	"""The state of a Homing: events accepted (ID -> body hash), and a plan of
	misbehaviours to play before answering normally."""

	def __init__(self, max_payload_bytes=1048576):
		self.max_payload_bytes = max_payload_bytes
		self.accepted = {}
		self.requests = []
		self.plan = []  # "500", "drop", "hang", "redirect", consumed in order
		self.workflow_failures = []
		self.release = threading.Event()
		self.lock = threading.Lock()


def make_handler(state):
	class Handler(http.server.BaseHTTPRequestHandler):
		protocol_version = "HTTP/1.1"

		def log_message(self, *args):
			pass

		def answer(self, status, obj, headers=()):
			data = json.dumps(obj).encode()
			self.send_response(status)
			self.send_header("Content-Type", "application/json")
			self.send_header("Content-Length", str(len(data)))
			for k, v in headers:
				self.send_header(k, v)
			self.end_headers()
			self.wfile.write(data)

		def error(self, status, code, message, field=None, **extra):
			err = {"code": code, "message": message, **extra}
			if field:
				err["field"] = field
			self.answer(status, {"error": err})

		def do_POST(self):
			body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
			with state.lock:
				state.requests.append((self.path, dict(self.headers), body))
				step = state.plan.pop(0) if state.plan else None
			if self.path == "/moved/v1/events":
				return self.answer(202, {"event_id": "should never be reached"})
			if step == "500":
				return self.error(500, "internal", "database unavailable")
			if step == "redirect":
				self.send_response(302)
				self.send_header("Location", "/moved/v1/events")
				self.send_header("Content-Length", "0")
				self.end_headers()
				return
			if step == "hang":
				state.release.wait(10)
				self.close_connection = True
				return
			if self.path != "/v1/events":
				return self.error(404, "not_found", "no such endpoint")
			if self.headers.get("Authorization") != f"Bearer {TOKEN}":
				return self.error(401, "unauthorized", "missing or unknown token", headers=[("WWW-Authenticate", "Bearer")])
			try:
				ev = json.loads(body)
			except ValueError:
				return self.error(400, "invalid_json", "request body is not JSON")
			if ev.get("event") not in EVENTS:
				return self.error(422, "invalid_request", f"event {ev.get('event')!r} is not one of ...", "event")
			doc = json.dumps(ev.get("doc"), separators=(",", ":"), ensure_ascii=False).encode()
			if len(doc) > state.max_payload_bytes:
				return self.error(413, "payload_too_large", f"doc is {len(doc)} bytes", "doc")
			if ev["event"] == core.WORKFLOW_TRANSITION:
				if state.workflow_failures:
					return self.error(502, "delivery_failed", "webhooks failed", failures=state.workflow_failures)
				return self.answer(200, {"event_id": ev["id"]})
			digest = hashlib.sha256(body).hexdigest()
			with state.lock:
				before = state.accepted.get(ev["id"])
				if before is None:
					state.accepted[ev["id"]] = digest
			if before is not None and before != digest:
				return self.error(409, "conflict", f"event {ev['id']!r} was published before with a different body")
			if step == "drop":
				# Accepted and committed, then the answer is lost.
				self.close_connection = True
				self.wfile.flush()
				self.connection.shutdown(socket.SHUT_RDWR)
				return
			self.answer(202 if before is None else 200, {"event_id": ev["id"]})

	return Handler


class ServerMixin:
	"""Starts a FakeHoming on 127.0.0.1 for each test (no tests of its own)."""

	def setUp(self):
		self.homing = FakeHoming(max_payload_bytes=2000)
		self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.homing))
		self.server.daemon_threads = True
		self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
		self.thread.start()
		self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
		self.clock = Clock()

	def tearDown(self):
		self.homing.release.set()
		self.server.shutdown()
		self.server.server_close()
		self.thread.join(5)

	def settings(self, **kw):
		base = dict(url=self.url, token=TOKEN, enabled=True, timeout=5, published={"Sales Order": frozenset()})
		base.update(kw)
		return core.Settings(**base)

	def queue(self, store, name, event="on_submit", doc=None, event_id=None):
		doc = doc if doc is not None else {"name": name, "grand_total": 1500.0}
		shaped = core.shape_event(event_id or core.new_event_id("frappe:test"), "Sales Order", name, event, doc)
		self.assertIsNone(shaped.error)
		store.add(name, shaped.body)
		store.rows[name]["row"].event_id = shaped.event_id
		return shaped

	def push(self, store, **kw):
		return core.push_due(store, self.settings(**kw), core.urllib_transport, self.clock)


class AgainstAServer(ServerMixin, unittest.TestCase):
	def test_accepted_then_repeated(self):
		store = MemoryStore()
		shaped = self.queue(store, "SO-1")
		s = self.push(store)
		self.assertEqual((s.sent, s.retried, s.failed), (1, 0, 0))
		self.assertEqual(store.rows, {})
		path, headers, body = self.homing.requests[0]
		self.assertEqual(path, "/v1/events")
		self.assertEqual(headers["Authorization"], f"Bearer {TOKEN}")
		self.assertEqual(headers["Content-Type"], "application/json")
		self.assertEqual(body, shaped.body.encode())
		# Publishing the same row again (a run that died before deleting it)
		# is answered 200 and accepted once.
		store.add("SO-1", shaped.body)
		self.assertEqual(self.push(store).sent, 1)
		self.assertEqual(list(self.homing.accepted), [shaped.event_id])

	def test_lost_answer_is_retried_under_the_same_id(self):
		store = MemoryStore()
		shaped = self.queue(store, "SO-1")
		self.homing.plan = ["drop"]
		s = self.push(store)
		self.assertEqual((s.sent, s.retried), (0, 1))
		self.assertIn("no answer from Homing", store.rows["SO-1"]["error"])
		self.assertEqual(list(self.homing.accepted), [shaped.event_id], "Homing did accept it")
		self.clock.advance(60)
		s = self.push(store)
		self.assertEqual(s.sent, 1)
		self.assertEqual(store.rows, {})
		bodies = [r[2] for r in self.homing.requests]
		self.assertEqual(bodies, [shaped.body.encode()] * 2, "the retry is byte for byte the same")
		self.assertEqual(len(self.homing.accepted), 1)

	def test_500_retries_with_backoff_then_delivers(self):
		store = MemoryStore()
		self.queue(store, "SO-1")
		self.queue(store, "SO-2")
		self.homing.plan = ["500", "500"]
		s = self.push(store)
		self.assertEqual((s.sent, s.retried), (0, 1))
		self.assertEqual(len(self.homing.requests), 1, "SO-2 waits: Homing is failing")
		self.assertEqual(store.rows["SO-1"]["code"], 500)
		self.assertIn("internal: database unavailable", store.rows["SO-1"]["error"])
		self.assertEqual(store.rows["SO-1"]["next_attempt"], T0 + dt.timedelta(seconds=30))
		self.clock.advance(30)
		s = self.push(store)
		self.assertEqual(s.retried, 1)
		self.assertEqual(store.rows["SO-1"]["next_attempt"], T0 + dt.timedelta(seconds=90))
		self.clock.advance(60)
		s = self.push(store)
		self.assertEqual(s.sent, 2)
		self.assertEqual(store.rows, {})

	def test_409_conflict_fails_for_good(self):
		store = MemoryStore()
		self.homing.accepted["frappe:test:dup"] = "another body"
		self.queue(store, "SO-1", event_id="frappe:test:dup")
		self.queue(store, "SO-2")
		s = self.push(store)
		self.assertEqual((s.sent, s.failed), (1, 1))
		row = store.rows["SO-1"]
		self.assertEqual((row["status"], row["code"]), (core.FAILED, 409))
		self.assertIn("conflict", row["error"])
		self.clock.advance(3600)
		self.push(store)
		self.assertEqual(len(self.homing.requests), 2, "a failed row is not sent again")

	def test_422_fails_for_good(self):
		store = MemoryStore()
		store.add("bad", json.dumps({"id": "x", "doc_type": "Sales Order", "event": "validate", "doc": {}}))
		s = self.push(store)
		self.assertEqual(s.failed, 1)
		self.assertEqual(store.rows["bad"]["code"], 422)
		self.assertIn("(field event)", store.rows["bad"]["error"])

	def test_413_when_homings_limit_is_lower_than_the_settings(self):
		store = MemoryStore()
		self.queue(store, "SO-1", doc={"name": "SO-1", "notes": "x" * 3000})
		s = self.push(store)
		self.assertEqual(s.failed, 1)
		self.assertEqual(store.rows["SO-1"]["code"], 413)

	def test_wrong_token_retries(self):
		store = MemoryStore()
		self.queue(store, "SO-1")
		s = self.push(store, token="revoked")
		self.assertEqual(s.retried, 1)
		self.assertEqual(store.rows["SO-1"]["code"], 401)
		self.clock.advance(30)
		self.assertEqual(self.push(store).sent, 1, "fixing the token delivers what waited")

	def test_redirect_is_not_followed(self):
		store = MemoryStore()
		self.queue(store, "SO-1")
		self.homing.plan = ["redirect"]
		s = self.push(store)
		self.assertEqual(s.retried, 1)
		self.assertEqual(store.rows["SO-1"]["code"], 302)
		self.assertIn("redirect", store.rows["SO-1"]["error"])
		self.assertEqual([r[0] for r in self.homing.requests], ["/v1/events"])

	def test_no_answer_in_time(self):
		store = MemoryStore()
		self.queue(store, "SO-1")
		self.homing.plan = ["hang"]
		s = self.push(store, timeout=0.3)
		self.homing.release.set()
		self.assertEqual(s.retried, 1)
		self.assertIn("no answer from Homing", store.rows["SO-1"]["error"])

	def test_connection_refused(self):
		sock = socket.socket()
		sock.bind(("127.0.0.1", 0))
		port = sock.getsockname()[1]
		sock.close()
		store = MemoryStore()
		self.queue(store, "SO-1")
		s = core.push_due(store, self.settings(url=f"http://127.0.0.1:{port}"), core.urllib_transport, self.clock)
		self.assertEqual(s.retried, 1)
		self.assertIsNone(store.rows["SO-1"]["code"])
		self.assertIn("refused", store.rows["SO-1"]["error"].lower())

	def test_workflow_transition(self):
		shaped = core.shape_event("wf-1", "Leave Application", "LA-1", core.WORKFLOW_TRANSITION, {"name": "LA-1"})
		resp = core.publish_now(self.settings(), shaped, core.urllib_transport)
		self.assertEqual(resp.status, 200)
		self.homing.workflow_failures = [{"webhook": "hr-system", "delivery_id": "d-1", "error": "HTTP 503"}]
		with self.assertRaisesRegex(core.PublishError, "hr-system: HTTP 503"):
			core.publish_now(self.settings(), shaped, core.urllib_transport)
		with self.assertRaisesRegex(core.PublishError, "401"):
			core.publish_now(self.settings(token="wrong"), shaped, core.urllib_transport)


if __name__ == "__main__":
	unittest.main()
