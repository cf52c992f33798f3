"""core.py without a network: skip rules, dedupe, event shaping, backoff, the
queue's state machine and the push loop, with a fake transport and clock."""

import datetime as dt
import decimal
import json
import unittest

from homing_frappe import core

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def settings(**kw):
	base = dict(
		url="http://homing.test:8088/",
		token="hmg_secret",
		enabled=True,
		published={"Sales Order": frozenset(), "ToDo": frozenset({"on_update"})},
	)
	base.update(kw)
	return core.Settings(**base)


class Clock:
	"""A clock that moves only when told to (or by step on every read)."""

	def __init__(self, start=T0, step=0.0):
		self.now = start
		self.step = dt.timedelta(seconds=step)

	def __call__(self):
		t = self.now
		self.now += self.step
		return t

	def advance(self, seconds):
		self.now += dt.timedelta(seconds=seconds)


class MemoryStore:
	"""core.Store in memory, in insertion order."""

	def __init__(self, rows=()):
		self.rows = {}  # name -> dict
		self.log = []
		for r in rows:
			self.add(*r)

	def add(self, name, body, attempts=0, next_attempt=T0, status=core.QUEUED):
		self.rows[name] = dict(
			row=core.Row(name, f"id-{name}", body, attempts),
			status=status,
			next_attempt=next_attempt,
			error=None,
			code=None,
		)

	def due(self, now, limit, after):
		after = set(after)
		out = [
			v["row"]
			for k, v in self.rows.items()
			if v["status"] == core.QUEUED and v["next_attempt"] <= now and k not in after
		]
		return out[:limit]

	def delete(self, row, d):
		self.log.append(("delete", row.name))
		del self.rows[row.name]

	def _set(self, row, d, status):
		v = self.rows[row.name]
		v.update(status=status, error=d.error, code=d.status_code)
		v["row"] = core.Row(row.name, row.event_id, row.body, d.attempts)
		if d.next_attempt:
			v["next_attempt"] = d.next_attempt

	def retry(self, row, d):
		self.log.append(("retry", row.name))
		self._set(row, d, core.QUEUED)

	def fail(self, row, d):
		self.log.append(("fail", row.name))
		self._set(row, d, core.FAILED)


class ScriptedTransport:
	"""Answers by body: script maps a row's body to a list of answers, each a
	status code or an exception, used in turn (the last one repeats)."""

	def __init__(self, script, default=202):
		self.script = {k: list(v) for k, v in script.items()}
		self.default = default
		self.calls = []

	def __call__(self, url, body, headers, timeout):
		self.calls.append((url, body, dict(headers), timeout))
		answers = self.script.get(body.decode())
		a = (answers.pop(0) if len(answers) > 1 else answers[0]) if answers else self.default
		if isinstance(a, Exception):
			raise a
		if isinstance(a, core.Response):
			return a
		return core.Response(a, json.dumps({"error": {"code": "x", "message": f"answer {a}"}}).encode())


class SkipRules(unittest.TestCase):
	def test_frappe_flags_skip_like_run_webhooks(self):
		s = settings()
		for flag in ("in_import", "in_patch", "in_install", "in_migrate"):
			with self.subTest(flag=flag):
				self.assertEqual(core.skip_reason({flag: True}, "Sales Order", "on_submit", False, s), flag)
		self.assertIsNone(core.skip_reason({}, "Sales Order", "on_submit", False, s))
		self.assertIsNone(core.skip_reason({"in_test": True}, "Sales Order", "on_submit", False, s))

	def test_skipped_by_flags(self):
		self.assertEqual(core.skipped_by_flags({"in_migrate": 1}), "in_migrate")
		self.assertIsNone(core.skipped_by_flags({"in_import": False, "in_test": True}))

	def test_on_change_not_in_insert(self):
		s = settings()
		self.assertIsNotNone(core.skip_reason({}, "Sales Order", "on_change", True, s))
		self.assertIsNotNone(core.skip_reason({}, "Sales Order", "on_update_after_submit", True, s))
		self.assertIsNone(core.skip_reason({}, "Sales Order", "on_change", False, s))
		self.assertIsNone(core.skip_reason({}, "Sales Order", "after_insert", True, s))

	def test_disabled_own_doctypes_unknown_and_unpublished(self):
		self.assertEqual(core.skip_reason({}, "Sales Order", "on_submit", False, settings(enabled=False)), "disabled")
		s = settings(published={"Homing Event Queue": frozenset(), "Homing Settings": frozenset()})
		self.assertEqual(core.skip_reason({}, "Homing Event Queue", "after_insert", True, s), "own doctype")
		self.assertEqual(core.skip_reason({}, "Homing Settings", "on_update", False, s), "own doctype")
		self.assertIn("not one Homing knows", core.skip_reason({}, "Sales Order", "validate", False, settings()))
		self.assertEqual(core.skip_reason({}, "Item", "on_update", False, settings()), "doctype not published")
		self.assertEqual(core.skip_reason({}, "ToDo", "after_insert", True, settings()), "event not published for this doctype")
		self.assertIsNone(core.skip_reason({}, "ToDo", "on_update", False, settings()))

	def test_parse_events(self):
		self.assertEqual(core.parse_events(""), frozenset())
		self.assertEqual(core.parse_events(None), frozenset())
		self.assertEqual(core.parse_events("on_submit, on_cancel\non_trash"), {"on_submit", "on_cancel", "on_trash"})
		with self.assertRaisesRegex(ValueError, "validate"):
			core.parse_events("on_submit validate")
		with self.assertRaisesRegex(ValueError, "workflow_transition"):
			# Not queued: it is sent synchronously by the workflow task.
			core.parse_events("workflow_transition")


class Dedupe(unittest.TestCase):
	def test_one_row_per_document_and_event(self):
		d = core.RequestDedupe()
		self.assertIsNone(d.row_for("Sales Order", "SO-1", "on_update"))
		d.remember("Sales Order", "SO-1", "on_update", "row1")
		self.assertEqual(d.row_for("Sales Order", "SO-1", "on_update"), "row1")
		# Another event, another document, another doctype: separate rows.
		self.assertIsNone(d.row_for("Sales Order", "SO-1", "on_change"))
		self.assertIsNone(d.row_for("Sales Order", "SO-2", "on_update"))
		self.assertIsNone(d.row_for("Quotation", "SO-1", "on_update"))
		# Integer names (autoincrement) and their string form are one key.
		d.remember("ToDo", 7, "on_update", "row2")
		self.assertEqual(d.row_for("ToDo", "7", "on_update"), "row2")
		d.forget("ToDo", 7, "on_update")
		self.assertIsNone(d.row_for("ToDo", 7, "on_update"))
		d.clear()
		self.assertEqual(len(d), 0)


class Shape(unittest.TestCase):
	def test_body_is_homings_event_request(self):
		doc = {"name": "SO-1", "grand_total": 1500.0, "customer": "Zoë", "items": [{"qty": 2, "item_code": "X"}]}
		s = core.shape_event("frappe:site:abc", "Sales Order", "SO-1", "on_submit", doc)
		self.assertIsNone(s.error)
		# Field order fixed, document keys sorted, compact, UTF-8 kept as is.
		self.assertEqual(
			s.body,
			'{"id":"frappe:site:abc","doc_type":"Sales Order","doc_name":"SO-1","event":"on_submit",'
			'"doc":{"customer":"Zoë","grand_total":1500.0,"items":[{"item_code":"X","qty":2}],"name":"SO-1"}}',
		)
		self.assertEqual(json.loads(s.body)["doc"], doc)
		self.assertEqual(s.doc_bytes, len(json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()))

	def test_tenant_goes_first_when_set(self):
		s = core.shape_event("frappe:site:abc", "ToDo", "T-1", "on_update", {"name": "T-1"}, tenant="erp-example-com")
		self.assertTrue(s.body.startswith('{"tenant":"erp-example-com","id":"frappe:site:abc",'), s.body)
		self.assertNotIn('"tenant"', core.shape_event("frappe:site:abc", "ToDo", "T-1", "on_update", {"name": "T-1"}).body)

	def test_tenant_of_site(self):
		for site, want in [("erp.example.com", "erp-example-com"), ("Site1.Local", "site1-local"), ("acme_erp", "acme_erp")]:
			self.assertEqual(core.tenant_of_site(site), want)
		for site in ["", ".hidden", "x" * 64]:
			with self.assertRaisesRegex(ValueError, "Homing refuses"):
				core.tenant_of_site(site)

	def test_same_input_same_bytes(self):
		a = core.shape_event("i", "D", "N", "on_update", {"b": 1, "a": 2})
		b = core.shape_event("i", "D", "N", "on_update", {"a": 2, "b": 1})
		self.assertEqual(a.body, b.body)

	def test_doc_name_defaults_to_doc_name_field(self):
		s = core.shape_event("i", "D", "", "on_update", {"name": "X-1"})
		self.assertEqual(json.loads(s.body)["doc_name"], "X-1")
		s = core.shape_event("i", "ToDo", 42, "on_update", {"name": 42})
		self.assertEqual(json.loads(s.body)["doc_name"], "42")

	def test_frappe_types(self):
		doc = {
			"posting_date": dt.date(2026, 3, 1),
			"modified": dt.datetime(2026, 3, 1, 10, 5, 0, 123456),
			"from_time": dt.timedelta(hours=9, minutes=30),
			"rate": decimal.Decimal("12.50"),
		}
		d = json.loads(core.shape_event("i", "D", "N", "on_update", doc).body)["doc"]
		self.assertEqual(d, {"posting_date": "2026-03-01", "modified": "2026-03-01 10:05:00.123456", "from_time": "9:30:00", "rate": 12.5})

	def test_size_limit_is_homings(self):
		doc = {"x": "a" * 100}
		size = len(json.dumps(doc, separators=(",", ":")).encode())
		ok = core.shape_event("i", "D", "N", "on_update", doc, max_doc_bytes=size)
		self.assertIsNone(ok.error)
		over = core.shape_event("i", "D", "N", "on_update", doc, max_doc_bytes=size - 1)
		self.assertIn(f"document is {size} bytes", over.error)
		self.assertIn("413", over.error)
		self.assertEqual(over.body, "", "an oversized body is not kept")
		# Multi-byte characters count as their UTF-8 bytes, as Homing counts.
		s = core.shape_event("i", "D", "N", "on_update", {"x": "é" * 10}, max_doc_bytes=1000)
		self.assertEqual(s.doc_bytes, len('{"x":""}') + 20)

	def test_default_limit_is_one_mib(self):
		self.assertEqual(core.Settings().max_doc_bytes, 1048576)
		big = {"x": "a" * 1048576}
		self.assertIsNotNone(core.shape_event("i", "D", "N", "on_update", big).error)

	def test_refused_content_is_reported_at_once(self):
		nul = core.shape_event("i", "D", "N", "on_update", {"x": "a\x00b"})
		self.assertIn("NUL", nul.error)
		# A backslash followed by u0000 is text, not a NUL.
		self.assertIsNone(core.shape_event("i", "D", "N", "on_update", {"x": "\\u0000"}).error)
		bad = core.shape_event("i", "D", "N", "on_update", {"x": "\udc80"})
		self.assertIn("cannot be encoded", bad.error)
		obj = core.shape_event("i", "D", "N", "on_update", {"x": object()})
		self.assertIn("cannot be encoded", obj.error)
		long_id = core.shape_event("i" * 201, "D", "N", "on_update", {})
		self.assertIn("200", long_id.error)

	def test_event_ids(self):
		a, b = core.new_event_id("frappe:erp.example.com"), core.new_event_id("frappe:erp.example.com")
		self.assertNotEqual(a, b)
		self.assertTrue(a.startswith("frappe:erp.example.com:"))
		self.assertEqual(core.new_event_id("p", "u"), "p:u")
		self.assertLessEqual(len(core.new_event_id("p" * 500)), core.MAX_ID_LENGTH)


class Backoff(unittest.TestCase):
	def test_exponential_and_capped(self):
		self.assertEqual([core.backoff(n, 30, 3600) for n in range(0, 10)], [0, 30, 60, 120, 240, 480, 960, 1920, 3600, 3600])
		self.assertEqual(core.backoff(10_000, 30, 3600), 3600)


class Decide(unittest.TestCase):
	row = core.Row("r", "id-r", "{}", attempts=2)

	def d(self, status=None, err=None, **kw):
		resp = None if status is None else core.Response(status, json.dumps({"error": {"code": "c", "message": "m", "field": "doc"}}).encode())
		return core.decide(self.row, resp, err, T0, settings(**kw))

	def test_accepted_deletes(self):
		for code in (200, 201, 202, 204):
			with self.subTest(code=code):
				d = self.d(code)
				self.assertEqual((d.action, d.attempts, d.status_code, d.halt), ("delete", 3, code, False))

	def test_refusals_fail_for_good(self):
		for code in (400, 409, 413, 422):
			with self.subTest(code=code):
				d = self.d(code)
				self.assertEqual(d.action, "fail")
				self.assertFalse(d.halt)
				self.assertIn(f"HTTP {code} c: m (field doc)", d.error)

	def test_transient_retries_with_backoff_and_halts(self):
		for code in (500, 502, 503, 401, 403, 404, 408, 429, 301, 302, 307):
			with self.subTest(code=code):
				d = self.d(code)
				self.assertEqual(d.action, "retry")
				self.assertTrue(d.halt)
				# Third attempt: 4 x base.
				self.assertEqual(d.next_attempt, T0 + dt.timedelta(seconds=120))
		d = self.d(302)
		self.assertIn("redirect", d.error)
		d = self.d(None, "Connection refused")
		self.assertEqual((d.action, d.status_code), ("retry", None))
		self.assertIn("no answer from Homing: Connection refused", d.error)

	def test_max_attempts(self):
		self.assertEqual(self.d(503, max_attempts=4).action, "retry")
		d = self.d(503, max_attempts=3)
		self.assertEqual(d.action, "fail")
		self.assertIn("gave up after 3 attempts", d.error)
		# A refusal fails at once whatever max_attempts says.
		self.assertEqual(self.d(409, max_attempts=0).action, "fail")

	def test_error_message_without_json(self):
		self.assertEqual(core.error_message(core.Response(502, b"<html>Bad Gateway</html>")), "HTTP 502 <html>Bad Gateway</html>")


class Push(unittest.TestCase):
	def test_sends_oldest_first_with_token_and_deletes_on_2xx(self):
		store = MemoryStore([("a", "A"), ("b", "B"), ("c", "C")])
		tr = ScriptedTransport({"B": [200]})
		s = core.push_due(store, settings(), tr, Clock())
		self.assertEqual((s.sent, s.retried, s.failed, s.halted), (3, 0, 0, None))
		self.assertEqual([c[1] for c in tr.calls], [b"A", b"B", b"C"])
		url, _, headers, timeout = tr.calls[0]
		self.assertEqual(url, "http://homing.test:8088/v1/events")
		self.assertEqual(headers["Authorization"], "Bearer hmg_secret")
		self.assertEqual(headers["Content-Type"], "application/json")
		self.assertEqual(timeout, 10.0)
		self.assertEqual(store.rows, {})

	def test_refusal_marks_failed_and_goes_on(self):
		store = MemoryStore([("a", "A"), ("b", "B"), ("c", "C")])
		tr = ScriptedTransport({"A": [409], "B": [422]})
		s = core.push_due(store, settings(), tr, Clock())
		self.assertEqual((s.sent, s.failed), (1, 2))
		self.assertEqual(store.rows["a"]["status"], core.FAILED)
		self.assertEqual(store.rows["a"]["code"], 409)
		self.assertEqual(store.rows["b"]["status"], core.FAILED)
		self.assertNotIn("c", store.rows)

	def test_transient_failure_stops_the_run_and_backs_off(self):
		store = MemoryStore([("a", "A"), ("b", "B")])
		tr = ScriptedTransport({"A": [503, 500, core.TransportError("Connection refused"), 202]})
		clock = Clock()
		s = core.push_due(store, settings(), tr, clock)
		self.assertEqual((s.sent, s.retried), (0, 1))
		self.assertIn("503", s.halted)
		self.assertEqual(len(tr.calls), 1, "B waits for the next run")
		self.assertEqual(store.rows["a"]["next_attempt"], T0 + dt.timedelta(seconds=30))

		# The next two runs, a minute apart: a is due, fails again, and waits
		# twice as long each time; b still waits behind it.
		waits = []
		for _ in range(2):
			clock.advance(60)
			core.push_due(store, settings(), tr, clock)
			waits.append((store.rows["a"]["next_attempt"] - clock.now).total_seconds())
		self.assertEqual(waits, [60, 120])
		self.assertEqual(store.rows["a"]["row"].attempts, 3)
		self.assertIn("Connection refused", store.rows["a"]["error"])
		self.assertIn("b", store.rows)
		# While a backs off, b is not held up.
		clock.advance(60)
		s = core.push_due(store, settings(), tr, clock)
		self.assertEqual(s.sent, 1)  # b; a is due only at +120
		self.assertEqual(list(store.rows), ["a"])
		clock.advance(60)
		s = core.push_due(store, settings(), tr, clock)
		self.assertEqual(s.sent, 1)
		self.assertEqual(store.rows, {})
		self.assertEqual(sum(1 for c in tr.calls if c[1] == b"A"), 4)

	def test_time_budget(self):
		store = MemoryStore([(str(i), str(i)) for i in range(10)])
		tr = ScriptedTransport({})
		# Each clock read moves 5 s; a 20 s budget sends a few and stops.
		s = core.push_due(store, settings(time_budget=20), tr, Clock(step=5))
		self.assertEqual(s.halted, "time budget spent")
		self.assertGreater(s.sent, 0)
		self.assertLess(s.sent, 10)
		self.assertEqual(len(store.rows), 10 - s.sent)

	def test_batches_until_empty(self):
		store = MemoryStore([(str(i), str(i)) for i in range(25)])
		s = core.push_due(store, settings(batch_size=4), ScriptedTransport({}), Clock())
		self.assertEqual(s.sent, 25)

	def test_not_due_not_sent(self):
		store = MemoryStore([("a", "A")])
		store.add("later", "L", next_attempt=T0 + dt.timedelta(minutes=5))
		store.add("failed", "F", status=core.FAILED)
		tr = ScriptedTransport({})
		core.push_due(store, settings(), tr, Clock())
		self.assertEqual([c[1] for c in tr.calls], [b"A"])
		self.assertEqual(set(store.rows), {"later", "failed"})

	def test_disabled_or_unconfigured_sends_nothing(self):
		for kw, why in (
			({"enabled": False}, "disabled"),
			({"url": ""}, "Homing URL is not set"),
			({"url": "homing:8088"}, "must start with http"),
			({"token": ""}, "token is not set"),
		):
			with self.subTest(kw=kw):
				store = MemoryStore([("a", "A")])
				tr = ScriptedTransport({})
				s = core.push_due(store, settings(**kw), tr, Clock())
				self.assertIn(why, s.skipped)
				self.assertEqual(tr.calls, [])
				self.assertIn("a", store.rows)


class PublishNow(unittest.TestCase):
	def shaped(self, **kw):
		return core.shape_event("wf-1", "Leave Application", "LA-1", core.WORKFLOW_TRANSITION, {"name": "LA-1", "workflow_state": "Approved"}, **kw)

	def test_200_returns(self):
		tr = ScriptedTransport({}, default=200)
		core.publish_now(settings(), self.shaped(), tr)
		self.assertEqual(json.loads(tr.calls[0][1])["event"], "workflow_transition")
		self.assertEqual(tr.calls[0][3], 60.0)

	def test_502_names_the_failed_webhooks(self):
		body = json.dumps({"error": {"code": "delivery_failed", "message": "1 of 2 webhooks failed", "failures": [{"webhook": "hr", "delivery_id": "d1", "error": "HTTP 500"}]}})
		tr = ScriptedTransport({}, default=core.Response(502, body.encode()))
		with self.assertRaisesRegex(core.PublishError, "hr: HTTP 500"):
			core.publish_now(settings(), self.shaped(), tr)

	def test_anything_else_raises(self):
		for answer in (202, 409, 422, 500, core.TransportError("timed out")):
			with self.subTest(answer=answer):
				tr = ScriptedTransport({}, default=answer)
				with self.assertRaises(core.PublishError):
					core.publish_now(settings(), self.shaped(), tr)

	def test_unsendable_raises_before_sending(self):
		tr = ScriptedTransport({}, default=200)
		with self.assertRaisesRegex(core.PublishError, "bytes"):
			core.publish_now(settings(), self.shaped(max_doc_bytes=5), tr)
		with self.assertRaisesRegex(core.PublishError, "token"):
			core.publish_now(settings(token=""), self.shaped(), tr)
		self.assertEqual(tr.calls, [])


if __name__ == "__main__":
	unittest.main()
