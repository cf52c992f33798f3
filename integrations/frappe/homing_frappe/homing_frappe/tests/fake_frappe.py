"""A stand-in for the few frappe APIs frappe_glue.py calls, so that the glue's
own code paths run in this repository's tests (Frappe cannot be installed
here). It models what the glue relies on, as read in Frappe's source, and
nothing more: a transactional table store whose rows vanish on rollback,
request-local flags, after_commit / after_rollback callbacks, Single doctype
settings with a Password field. It is not Frappe: passing against it proves
the glue consistent with these assumptions, not with a real site (README,
"What was not run").
"""

import copy
import itertools
import json
import sys
import types
import uuid


class _dict(dict):
	def __getattr__(self, key):
		return self.get(key)

	def __setattr__(self, key, value):
		self[key] = value


class FrappeError(Exception):
	pass


class CallbackManager:
	def __init__(self):
		self._fns = []

	def add(self, fn):
		self._fns.append(fn)

	def run(self):
		fns, self._fns = self._fns, []
		for fn in fns:
			fn()


class DB:
	"""Tables of dict rows; commit() keeps, rollback() restores the last
	committed state, like a database transaction."""

	def __init__(self):
		self.tables = {}
		self.committed = {}
		self.after_commit = CallbackManager()
		self.after_rollback = CallbackManager()
		self.commits = 0

	def table(self, doctype):
		return self.tables.setdefault(doctype, {})

	def commit(self):
		self.committed = copy.deepcopy(self.tables)
		self.commits += 1
		self.after_commit.run()

	def rollback(self):
		self.tables = copy.deepcopy(self.committed)
		self.after_rollback.run()

	def exists(self, doctype, name):
		return name in self.table(doctype)

	def get_value(self, doctype, name, fields, as_dict=False):
		row = self.table(doctype).get(name)
		if row is None:
			return None
		if isinstance(fields, (list, tuple)):
			return _dict({f: row.get(f) for f in fields}) if as_dict else tuple(row.get(f) for f in fields)
		return row.get(fields)

	def set_value(self, doctype, name, values, update_modified=True):
		row = self.table(doctype).get(name)
		if row is not None:
			row.update(values)

	def delete(self, doctype, filters):
		self.table(doctype).pop(filters["name"], None)


def _match(row, flt):
	field, op, value = flt
	v = row.get(field)
	if op == "=":
		return v == value
	if op == "<=":
		return v is not None and v <= value
	if op == "not in":
		return v not in value
	raise NotImplementedError(op)


_MODULES = ("frappe", "frappe.utils", "homing_frappe.frappe_glue")
_saved = {}


def install(settings_values, site="erp.example.com", now=None):
	"""Put a fake frappe into sys.modules (until uninstall puts back what was
	there: under bench run-tests, the real frappe); returns it.
	settings_values are Homing Settings' fields (token included, as
	get_password returns it)."""
	_saved.clear()
	_saved.update({name: sys.modules.pop(name) for name in _MODULES if name in sys.modules})
	frappe = types.ModuleType("frappe")
	frappe.FrappeError = FrappeError
	frappe._dict = _dict
	frappe.db = DB()
	frappe.flags = _dict()
	frappe.local = types.SimpleNamespace(site=site)
	frappe.error_log = []
	frappe.clock = now
	seq = itertools.count()

	class Settings(_dict):
		def get_password(self, field, raise_exception=True):
			return self.get(field)

	def get_cached_doc(doctype):
		assert doctype == "Homing Settings", doctype
		s = Settings(settings_values)
		s["doctypes"] = [_dict(r) for r in settings_values.get("doctypes", [])]
		return s

	class Doc(_dict):
		def insert(self, ignore_permissions=False, ignore_links=False):
			self.name = uuid.uuid4().hex[:10]
			self.creation = (frappe.clock(), next(seq))
			frappe.db.table(self.doctype)[self.name] = dict(self)
			return self

	def get_doc(d):
		return Doc(d)

	def get_all(doctype, filters, fields, order_by, limit_page_length):
		rows = [r for r in frappe.db.table(doctype).values() if all(_match(r, f) for f in filters)]
		assert order_by == "creation asc, name asc", order_by
		rows.sort(key=lambda r: (r["creation"], r["name"]))
		return [_dict({f: r.get(f) for f in fields}) for r in rows[:limit_page_length]]

	def as_json(doc):
		return json.dumps(doc.as_dict(), indent=1, sort_keys=True, default=str)

	def log_error(title=None, message=None, reference_doctype=None, reference_name=None):
		frappe.error_log.append(_dict(title=title, message=message, reference_name=reference_name))

	def throw(msg, exc=FrappeError, title=None):
		raise exc(msg)

	def whitelist(*a, **kw):
		return lambda fn: fn

	frappe.get_cached_doc = get_cached_doc
	frappe.get_doc = get_doc
	frappe.get_all = get_all
	frappe.as_json = as_json
	frappe.log_error = log_error
	frappe.throw = throw
	frappe.whitelist = whitelist
	frappe.only_for = lambda *a, **kw: None
	frappe.parse_json = json.loads
	frappe.logger = lambda *a, **kw: types.SimpleNamespace(warning=lambda *a, **kw: None)

	utils = types.ModuleType("frappe.utils")
	utils.now_datetime = lambda: frappe.clock()
	frappe.utils = utils
	sys.modules["frappe"] = frappe
	sys.modules["frappe.utils"] = utils
	return frappe


def uninstall():
	for name in _MODULES:
		sys.modules.pop(name, None)
	sys.modules.update(_saved)
	_saved.clear()


class Document(_dict):
	"""A document as doc_events see it: fields, doctype, name, flags."""

	def __init__(self, doctype, name, **fields):
		super().__init__(doctype=doctype, name=name, **fields)
		self.flags = _dict()

	def as_dict(self):
		return {k: v for k, v in self.items() if k != "flags"}
