"""Work out what Frappe sends for each sample document, following Frappe's code.

Run: python3 expected.py > expected.json  (needs jinja2). The test compares Homing's
requests with expected.json byte for byte. Each step cites the Frappe function it copies
(frappe/frappe, frappe/integrations/doctype/webhook/webhook.py unless said otherwise).
Helpers that would need a Frappe site are replaced by their no-database forms, as Homing
has them: format_date uses the default date format dd-mm-yyyy, fmt_money the default
number format #,###.## with 2 decimals.
"""
import base64, datetime, hashlib, hmac, json, sys
from jinja2 import Environment, DebugUndefined


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


def getdate(s=None):
    return datetime.date.fromisoformat(s[:10]) if s else datetime.date.today()


def add_days(d, n):  # add_to_date on a str returns a str
    return (getdate(d) + datetime.timedelta(days=n)).isoformat()


def date_diff(a, b):
    return (getdate(a) - getdate(b)).days


def format_date(d, fmt=None):
    d = getdate(d)
    return (fmt or "dd-mm-yyyy").replace("dd", "%02d" % d.day).replace("mm", "%02d" % d.month).replace("yyyy", "%04d" % d.year)


def fmt_money(amount, precision=2, currency=None):
    s = "{:,.{}f}".format(flt(amount), precision)
    return (currency + " " + s) if currency else s


def as_json(obj, indent=1):  # frappe/__init__.py as_json
    return json.dumps(obj, indent=indent, sort_keys=True, default=str, separators=(",", ": "))


utils = _dict(nowdate=lambda: datetime.date.today().isoformat(), getdate=lambda s=None: getdate(s).isoformat(),
              add_days=add_days, date_diff=date_diff, format_date=format_date, fmt_money=fmt_money,
              flt=flt, cint=cint, cstr=cstr, format_value=cstr)

# frappe/utils/jinja.py get_jenv (undefined=DebugUndefined) and set_filters.
jenv = Environment(undefined=DebugUndefined)
jenv.filters.update({"json": as_json, "len": len, "int": cint, "str": cstr, "flt": flt, "cint": cint, "cstr": cstr})
jenv.globals.update({"frappe": _dict(utils=utils)})


def get_context(doc):  # get_context
    return {"doc": doc, "utils": utils}


class Document:
    """What run_webhooks evaluates conditions with: a Document, whose fields are attributes
    (doc.items is the child table, not dict.items) and whose missing fields read None."""

    def __init__(self, d):
        self._d = d

    def __getattr__(self, name):
        v = self._d.get(name)
        if isinstance(v, dict):
            return Document(v)
        if isinstance(v, list):
            return [Document(x) if isinstance(x, dict) else x for x in v]
        return v

    def get(self, key, default=None):
        return self._d.get(key, default)


def safe_eval(code, doc):  # frappe/utils/safe_exec.py safe_eval, with add_data_utils
    g = {"__builtins__": {"len": len, "int": int, "float": float, "str": str, "True": True, "False": False, "None": None},
         "frappe": _dict(utils=utils)}
    g.update(utils)
    return eval(code, g, get_context(Document(doc)))


def get_webhook_data(doc, webhook):  # get_webhook_data
    data = {}
    if webhook.get("webhook_data"):
        data = {w["key"]: doc.get(w["fieldname"]) for w in webhook["webhook_data"]}
    elif webhook.get("webhook_json"):
        data = jenv.from_string(webhook["webhook_json"]).render(get_context(doc))
        data = json.loads(data)
    return data


def get_webhook_headers(doc, webhook, secret):  # get_webhook_headers
    headers = {}
    if webhook.get("enable_security"):
        data = get_webhook_data(doc, webhook)
        signature = base64.b64encode(hmac.new(secret.encode("utf8"), json.dumps(data).encode("utf8"), hashlib.sha256).digest())
        headers["X-Frappe-Webhook-Signature"] = signature.decode()
    for h in webhook.get("webhook_headers") or []:
        if h.get("key") and h.get("value"):
            headers[h["key"]] = h["value"]
    return headers


def main():
    hooks = {h["name"]: h for h in json.load(open("webhooks.json"))}
    secrets = json.load(open("secrets.json"))
    out = []
    for case in json.load(open("docs.json")):
        webhook = hooks[case["webhook"]]
        doc = _wrap(case["doc"])
        # frappe/integrations/doctype/webhook/__init__.py run_webhooks: the condition decides.
        if webhook.get("condition") and not safe_eval(webhook["condition"], doc):
            out.append({"webhook": webhook["name"], "doc": case["doc"]["name"], "sent": False})
            continue
        # enqueue_webhook
        url = webhook["request_url"]
        if webhook.get("is_dynamic_url"):
            url = jenv.from_string(url).render(get_context(doc))
        headers = get_webhook_headers(doc, webhook, secrets.get(webhook["name"], ""))
        data = get_webhook_data(doc, webhook)
        out.append({"webhook": webhook["name"], "doc": case["doc"]["name"], "sent": True,
                    "method": webhook["request_method"], "url": url, "headers": headers,
                    "body": json.dumps(data, default=str)})
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


main()
