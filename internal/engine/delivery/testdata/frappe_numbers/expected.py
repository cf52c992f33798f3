"""Work out the body Frappe sends for each case of cases.json on doc.json.

Run: python3 expected.py > expected.json  (needs jinja2). TestFrappeNumbersAsPython
compares Homing's bodies with expected.json byte for byte, and runs this script to check
that expected.json is still what it writes.

The document is read with json.loads, as Frappe reads it: 3 is an int, 1500.0 a float.
The body is get_webhook_data's (frappe/integrations/doctype/webhook/webhook.py): the data
rows as {key: doc.get(fieldname)}, or the template rendered with Frappe's Jinja
(frappe/utils/jinja.py get_jenv, set_filters) and json.loads'ed; then, as enqueue_webhook
sends it, json.dumps(data, default=str).
"""
import json
import sys

from jinja2 import DebugUndefined, Environment


class _dict(dict):
    """frappe._dict: missing attributes are None."""
    __getattr__ = dict.get


def _wrap(v):
    if isinstance(v, dict):
        return _dict({k: _wrap(x) for k, x in v.items()})
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


def flt(s, precision=None):  # frappe.utils.data.flt
    try:
        return float(s if not isinstance(s, str) else s.replace(",", ""))
    except Exception:
        return 0.0


def cint(s):  # frappe.utils.data.cint
    try:
        return int(float(s))
    except Exception:
        return 0


def cstr(s):  # frappe.utils.data.cstr
    return "" if s is None else str(s)


def as_json(obj, indent=1):  # frappe/__init__.py as_json
    return json.dumps(obj, indent=indent, sort_keys=True, default=str, separators=(",", ": "))


utils = _dict(flt=flt, cint=cint, cstr=cstr)
jenv = Environment(undefined=DebugUndefined)
jenv.filters.update({"json": as_json, "len": len, "int": cint, "str": cstr, "flt": flt, "cint": cint, "cstr": cstr})
jenv.globals.update({"frappe": _dict(utils=utils)})


def get_webhook_data(doc, case):
    if case.get("fields"):
        return {key: doc.get(fieldname) for fieldname, key in case["fields"]}
    data = jenv.from_string(case["template"]).render({"doc": doc, "utils": utils})
    return json.loads(data)


def main():
    doc = _wrap(json.load(open("doc.json")))
    out = [{"name": case["name"], "body": json.dumps(get_webhook_data(doc, case), default=str)}
           for case in json.load(open("cases.json"))]
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


main()
