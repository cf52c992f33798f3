"""The part of homing_frappe that does not need Frappe.

Everything here is plain Python (the standard library only) so that it can be
tested without a Frappe site: which document events to publish (Frappe's own
skip rules and its once-per-request dedupe), the event as Homing's
``POST /v1/events`` takes it, the queue's state machine (retry with
exponential backoff, permanent failures), the push loop, and the synchronous
workflow_transition publish. The clock and the HTTP transport are injected.

frappe_glue.py is the only module that imports frappe; it reads the settings
and the queue table and hands them to the functions below.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import http.client
import json
import re
import socket
import urllib.error
import urllib.request
import uuid
from typing import Any, Callable, Iterable, Mapping, Protocol

# Homing's document events (models.DocEvents in Homing; README "Events are
# Frappe's document events").
DOC_EVENTS = (
	"after_insert",
	"on_update",
	"on_submit",
	"on_cancel",
	"on_trash",
	"on_update_after_submit",
	"on_change",
)
WORKFLOW_TRANSITION = "workflow_transition"

# This app's own doctypes never publish: writing a queue row must not queue a
# row about the queue row.
OWN_DOCTYPES = frozenset({"Homing Settings", "Homing Event Queue", "Homing Published DocType"})

# The flags Frappe's run_webhooks returns early on
# (frappe/integrations/doctype/webhook/__init__.py: in_import, in_patch,
# in_install, in_migrate).
SKIP_FLAGS = ("in_import", "in_patch", "in_install", "in_migrate")

# Homing's limits (internal/engine/dispatch/event.go): an event ID of at most 200
# characters; delivery.max_payload_bytes defaults to 1 MiB.
MAX_ID_LENGTH = 200
DEFAULT_MAX_DOC_BYTES = 1048576

# Queue row statuses.
QUEUED = "Queued"
FAILED = "Failed"


# --- settings ---------------------------------------------------------------


@dataclasses.dataclass
class Settings:
	"""Homing Settings, as the glue reads them from the Single doctype."""

	url: str = ""
	token: str = ""
	enabled: bool = False
	# Seconds one queued push may take.
	timeout: float = 10.0
	# Seconds a workflow_transition may take: Homing answers after one
	# attempt per matching webhook, so this must cover their timeouts.
	workflow_timeout: float = 60.0
	# Homing's delivery.max_payload_bytes: a larger document is refused (413).
	max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES
	# Backoff: base * 2^(attempts-1) seconds, at most max.
	backoff_base: float = 30.0
	backoff_max: float = 3600.0
	# 0: retry transient failures for ever (the backoff is capped); N: mark a
	# row Failed after N attempts.
	max_attempts: int = 0
	# Rows one run reads at a time, and the seconds one run may spend.
	batch_size: int = 200
	time_budget: float = 50.0
	# Event IDs start with this (the site's name, so that two sites publishing
	# to one Homing cannot collide).
	event_id_prefix: str = "frappe"
	# The tenant every event names ("tenant" in POST /v1/events), empty for
	# the token's own: tenant_of_site(site) when Homing Settings has
	# "Tenant from Site" on, so that one Homing serves a bench's sites apart.
	tenant: str = ""
	# doctype -> the events to publish for it (an empty set: all of them).
	# Doctypes not listed are not published.
	published: Mapping[str, frozenset] = dataclasses.field(default_factory=dict)

	def endpoint(self) -> str:
		return self.url.rstrip("/") + "/v1/events"

	def check(self) -> str | None:
		"""Why pushing cannot work with these settings, or None."""
		if not self.url:
			return "Homing URL is not set"
		if not (self.url.startswith("http://") or self.url.startswith("https://")):
			return f"Homing URL {self.url!r} must start with http:// or https://"
		if not self.token:
			return "Homing token is not set"
		return None


def parse_events(text: str | None) -> frozenset:
	"""The events of a Homing Published DocType row: names separated by
	commas, spaces or new lines; empty means all of DOC_EVENTS. Raises
	ValueError naming an unknown event."""
	names = [n for n in (text or "").replace(",", " ").split() if n]
	unknown = [n for n in names if n not in DOC_EVENTS]
	if unknown:
		raise ValueError(f"unknown event(s) {', '.join(unknown)}; use {', '.join(DOC_EVENTS)}")
	return frozenset(names)


# --- what to publish ----------------------------------------------------------


def skipped_by_flags(flags: Mapping[str, Any]) -> str | None:
	"""The Frappe flag that turns publishing off (run_webhooks' early
	return), or None. Checked before anything is read: during install or
	migrate, Homing Settings may not exist yet."""
	for flag in SKIP_FLAGS:
		if flags.get(flag):
			return flag
	return None


def skip_reason(
	flags: Mapping[str, Any],
	doctype: str,
	event: str,
	in_insert: bool,
	settings: Settings,
) -> str | None:
	"""Why the document event must not be queued, or None to queue it.

	Follows Frappe's run_webhooks: nothing during import, patches, install or
	migrate; on_change (and the update-after-submit events) not while the
	document is being inserted ("value change is not applicable in insert").
	Then this app's own rules: disabled, one of its own doctypes, a doctype
	or event not chosen in Homing Settings.
	"""
	flag = skipped_by_flags(flags)
	if flag:
		return flag
	if not settings.enabled:
		return "disabled"
	if doctype in OWN_DOCTYPES:
		return "own doctype"
	if event not in DOC_EVENTS:
		return f"event {event} is not one Homing knows"
	if in_insert and event in ("on_change", "on_update_after_submit"):
		return "value change is not applicable in insert"
	if doctype not in settings.published:
		return "doctype not published"
	events = settings.published[doctype]
	if events and event not in events:
		return "event not published for this doctype"
	return None


class RequestDedupe:
	"""Frappe publishes a webhook once per document per request
	(frappe.flags.webhooks_executed, later the queue flushed on commit, which
	keeps the document's last instance). Here the key is (doctype, name,
	event): the first time, a queue row is written; a repeat within the same
	request updates that row with the document's latest state instead of
	writing a second one. The glue keeps one of these in frappe.flags and
	forgets it when the transaction ends."""

	def __init__(self) -> None:
		self._rows: dict[tuple[str, str, str], str] = {}

	@staticmethod
	def key(doctype: str, name: str, event: str) -> tuple[str, str, str]:
		return (doctype, str(name), event)

	def row_for(self, doctype: str, name: str, event: str) -> str | None:
		return self._rows.get(self.key(doctype, name, event))

	def remember(self, doctype: str, name: str, event: str, row: str) -> None:
		self._rows[self.key(doctype, name, event)] = row

	def forget(self, doctype: str, name: str, event: str) -> None:
		self._rows.pop(self.key(doctype, name, event), None)

	def clear(self) -> None:
		self._rows.clear()

	def __len__(self) -> int:
		return len(self._rows)


# --- the event --------------------------------------------------------------


MAX_TENANT_LENGTH = 63


def tenant_of_site(site: str) -> str:
	"""The Homing tenant named after a Frappe site: the site name in lower
	case with every character Homing's tenant names do not allow (a-z, 0-9,
	'-', '_') made '-', so erp.example.com is erp-example-com. Raises
	ValueError when the result cannot name a tenant (empty, too long, or
	starting with '-' or '_'), saying so."""
	name = re.sub(r"[^a-z0-9_-]", "-", (site or "").strip().lower())
	if not name or len(name) > MAX_TENANT_LENGTH or name[0] in "-_":
		raise ValueError(
			f"site {site!r} makes the tenant name {name!r}, which Homing refuses: a tenant name is 1 to "
			f"{MAX_TENANT_LENGTH} of a-z, 0-9, '-' and '_', starting with a letter or digit; turn "
			"Tenant from Site off and publish with a token of the site's tenant instead"
		)
	return name


def new_event_id(prefix: str, unique: str | None = None) -> str:
	"""A new event ID, stable for the queue row that stores it: every retry
	sends it again, so Homing answers a repeat with 200 and delivers nothing
	twice."""
	unique = unique or uuid.uuid4().hex
	prefix = (prefix or "frappe")[: MAX_ID_LENGTH - len(unique) - 1]
	return f"{prefix}:{unique}"


def json_default(value: Any) -> Any:
	"""What frappe.as_json does with the types a document holds."""
	if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
		return value.isoformat(sep=" ") if isinstance(value, _dt.datetime) else value.isoformat()
	if isinstance(value, _dt.timedelta):
		return str(value)
	if isinstance(value, decimal.Decimal):
		return float(value)
	if isinstance(value, (set, frozenset, tuple)):
		return list(value)
	if isinstance(value, bytes):
		return value.decode("utf-8")
	raise TypeError(f"{type(value).__name__} is not JSON serializable")


@dataclasses.dataclass
class Shaped:
	"""An event ready to queue: body is the exact request body (stored, and
	sent unchanged on every attempt, so that Homing sees the same body for the
	same ID); error says why it can never be accepted (then it is queued as
	Failed, visible in the list)."""

	event_id: str
	doc_type: str
	doc_name: str
	event: str
	body: str
	doc_bytes: int
	error: str | None = None


def _has_nul(value: Any) -> bool:
	if isinstance(value, str):
		return "\x00" in value
	if isinstance(value, dict):
		return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
	if isinstance(value, list):
		return any(_has_nul(v) for v in value)
	return False


def shape_event(
	event_id: str,
	doc_type: str,
	doc_name: str,
	event: str,
	doc: Mapping[str, Any],
	max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES,
	tenant: str = "",
) -> Shaped:
	"""The body of POST /v1/events: {"id", "doc_type", "doc_name", "event",
	"doc"} (Homing's internal/ops/api/events.go eventRequest), with "tenant" first when
	tenant is set. The document is encoded
	once, compactly with sorted keys; its size is counted as Homing counts it
	(the bytes of "doc" as sent) and checked here, so that an oversized
	document is reported at once instead of being refused on every attempt.
	"""
	doc_name = str(doc_name or doc.get("name") or "")
	error = None
	if len(event_id) > MAX_ID_LENGTH:
		error = f"event id is {len(event_id)} characters long, Homing allows {MAX_ID_LENGTH}"
	try:
		doc_json = json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=json_default)
		doc_bytes = len(doc_json.encode("utf-8"))
	except (TypeError, ValueError, UnicodeEncodeError) as e:
		return Shaped(event_id, doc_type, doc_name, event, "", 0, f"document cannot be encoded as JSON: {e}")
	if error is None and doc_bytes > max_doc_bytes:
		error = (
			f"document is {doc_bytes} bytes, more than Homing's delivery.max_payload_bytes "
			f"({max_doc_bytes}); Homing would refuse it (413)"
		)
	if error is None and "\\u0000" in doc_json and _has_nul(json.loads(doc_json)):
		error = "document contains a NUL character (\\u0000), which Homing refuses (422)"
	fields = {"tenant": tenant} if tenant else {}
	fields.update({"id": event_id, "doc_type": doc_type, "doc_name": doc_name, "event": event})
	head = json.dumps(
		fields,
		ensure_ascii=False,
		separators=(",", ":"),
	)
	body = head[:-1] + ',"doc":' + doc_json + "}"
	if error is not None:
		# Keep the row small: the body of a refused event is not kept.
		body = "" if doc_bytes > max_doc_bytes else body
	return Shaped(event_id, doc_type, doc_name, event, body, doc_bytes, error)


# --- HTTP -------------------------------------------------------------------


class TransportError(Exception):
	"""No HTTP answer: connection refused, reset, timed out, DNS, TLS."""


@dataclasses.dataclass
class Response:
	status: int
	body: bytes = b""


# A transport posts body to url with headers and returns the answer, or
# raises TransportError when there is none.
Transport = Callable[[str, bytes, Mapping[str, str], float], Response]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
	# urllib would turn a redirected POST into a GET without its body; a
	# redirect is reported as the 3xx it is.
	def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: PLR0913
		return None


_opener = urllib.request.build_opener(_NoRedirect)


def urllib_transport(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> Response:
	"""The default transport: urllib from the standard library."""
	req = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
	try:
		with _opener.open(req, timeout=timeout) as resp:
			return Response(resp.status, resp.read())
	except urllib.error.HTTPError as e:
		try:
			data = e.read()
		except Exception:
			data = b""
		return Response(e.code, data)
	except (urllib.error.URLError, OSError, socket.timeout, http.client.HTTPException) as e:
		reason = getattr(e, "reason", e)
		raise TransportError(str(reason) or type(e).__name__) from e


def post_event(settings: Settings, body: str, transport: Transport, timeout: float) -> Response:
	return transport(
		settings.endpoint(),
		body.encode("utf-8"),
		{
			"Content-Type": "application/json",
			"Accept": "application/json",
			"Authorization": f"Bearer {settings.token}",
			"User-Agent": "homing_frappe",
		},
		timeout,
	)


def error_message(resp: Response) -> str:
	"""Homing's {"error": {"code", "message", "field"}} as one line."""
	text = resp.body.decode("utf-8", "replace")
	try:
		err = json.loads(text)["error"]
		msg = f"{err.get('code', '')}: {err.get('message', '')}"
		if err.get("field"):
			msg += f" (field {err['field']})"
		return f"HTTP {resp.status} {msg}"
	except (ValueError, KeyError, TypeError, AttributeError):
		return f"HTTP {resp.status} {text[:500]}".rstrip()


# --- the queue's state machine ----------------------------------------------

# Answers that mean the event itself will never be accepted: retrying sends
# the same body and gets the same answer. 400 invalid_json, 409 conflict (the
# ID was published before with another body), 413 payload_too_large, 422
# invalid_request.
PERMANENT = frozenset({400, 409, 413, 422})


@dataclasses.dataclass
class Row:
	"""A queued event, as the glue reads it from Homing Event Queue."""

	name: str
	event_id: str
	body: str
	attempts: int = 0


@dataclasses.dataclass
class Decision:
	# "delete" (accepted), "retry" (at next_attempt) or "fail" (for good).
	action: str
	attempts: int
	status_code: int | None
	error: str | None
	next_attempt: _dt.datetime | None = None
	# Stop this run: Homing is down, or refuses the token, and the rows
	# behind this one would meet the same answer.
	halt: bool = False


def backoff(attempts: int, base: float, cap: float) -> float:
	"""Seconds to wait after the attempts-th failed attempt: base, 2 base,
	4 base, ... at most cap."""
	if attempts < 1:
		return 0.0
	# 2**60 is far past any cap; avoids overflowing on a very old row.
	return float(min(cap, base * (2 ** min(attempts - 1, 60))))


def decide(row: Row, resp: Response | None, transport_error: str | None, now: _dt.datetime, settings: Settings) -> Decision:
	"""What to do with a row after one attempt."""
	attempts = row.attempts + 1
	if resp is not None and 200 <= resp.status < 300:
		# 202: accepted; 200: this ID (with this body) was accepted before.
		return Decision("delete", attempts, resp.status, None)
	if resp is not None and resp.status in PERMANENT:
		return Decision("fail", attempts, resp.status, error_message(resp))
	if resp is None:
		code, error = None, f"no answer from Homing: {transport_error}"
	else:
		code, error = resp.status, error_message(resp)
		if 300 <= resp.status < 400:
			error += " (a redirect: set Homing URL to where it points)"
	if settings.max_attempts and attempts >= settings.max_attempts:
		return Decision("fail", attempts, code, f"gave up after {attempts} attempts; last: {error}")
	delay = backoff(attempts, settings.backoff_base, settings.backoff_max)
	return Decision("retry", attempts, code, error, now + _dt.timedelta(seconds=delay), halt=True)


class Store(Protocol):
	"""The queue table. The glue implements it on Homing Event Queue, and
	commits after each change so that what was done survives a crash."""

	def due(self, now: _dt.datetime, limit: int, after: Iterable[str]) -> list[Row]: ...

	def delete(self, row: Row, decision: Decision) -> None: ...

	def retry(self, row: Row, decision: Decision) -> None: ...

	def fail(self, row: Row, decision: Decision) -> None: ...


@dataclasses.dataclass
class Summary:
	sent: int = 0
	retried: int = 0
	failed: int = 0
	halted: str | None = None
	skipped: str | None = None


def push_due(store: Store, settings: Settings, transport: Transport, clock: Callable[[], _dt.datetime]) -> Summary:
	"""Push the queued events that are due, oldest first, each once, until
	none is left, the time budget is spent, or one fails transiently (then
	the rest wait for the next run: Homing is down or refusing, and trying
	them all would only multiply timeouts). A row is deleted only after a
	2xx answer; a permanent refusal marks it Failed; anything else schedules
	it again with exponential backoff."""
	summary = Summary()
	why = settings.check() if settings.enabled else "disabled"
	if why:
		summary.skipped = why
		return summary
	start = clock()
	deadline = start + _dt.timedelta(seconds=settings.time_budget)
	tried: list[str] = []
	while True:
		now = clock()
		if now >= deadline:
			summary.halted = "time budget spent"
			return summary
		rows = store.due(now, settings.batch_size, tried)
		if not rows:
			return summary
		for row in rows:
			now = clock()
			if now >= deadline:
				summary.halted = "time budget spent"
				return summary
			tried.append(row.name)
			resp, terr = None, None
			try:
				resp = post_event(settings, row.body, transport, settings.timeout)
			except TransportError as e:
				terr = str(e)
			d = decide(row, resp, terr, clock(), settings)
			if d.action == "delete":
				store.delete(row, d)
				summary.sent += 1
			elif d.action == "fail":
				store.fail(row, d)
				summary.failed += 1
			else:
				store.retry(row, d)
				summary.retried += 1
				summary.halted = d.error
				return summary


# --- workflow_transition ----------------------------------------------------


class PublishError(Exception):
	"""A workflow_transition Homing did not deliver; raising it fails the
	transition (Frappe runs a synchronous transition task in the
	transition's transaction)."""


def publish_now(settings: Settings, shaped: Shaped, transport: Transport) -> Response:
	"""Post a workflow_transition and wait: Homing makes one attempt per
	matching webhook and answers 200 when every one succeeded, else 502
	delivery_failed naming each failure. Anything but 200 raises
	PublishError."""
	if shaped.error:
		raise PublishError(f"Homing cannot accept {shaped.doc_type} {shaped.doc_name}: {shaped.error}")
	why = settings.check()
	if why:
		raise PublishError(f"cannot send the workflow transition to Homing: {why} (Homing Settings)")
	try:
		resp = post_event(settings, shaped.body, transport, settings.workflow_timeout)
	except TransportError as e:
		raise PublishError(f"no answer from Homing at {settings.endpoint()}: {e}") from e
	if resp.status == 200:
		return resp
	if resp.status == 502:
		try:
			failures = json.loads(resp.body)["error"]["failures"]
			detail = "; ".join(f"{f.get('webhook')}: {f.get('error')}" for f in failures)
		except (ValueError, KeyError, TypeError, AttributeError):
			detail = error_message(resp)
		raise PublishError(f"webhooks failed for {shaped.doc_type} {shaped.doc_name}: {detail}")
	raise PublishError(f"Homing refused the workflow transition: {error_message(resp)}")
