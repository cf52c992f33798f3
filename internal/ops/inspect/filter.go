package inspect

import (
	"fmt"
	"strings"
	"time"
)

// ParamError is a listing parameter that cannot be accepted, naming it so
// the API and the console can each point at it in their own terms.
type ParamError struct {
	Param   string
	Message string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Message }

func paramError(param, format string, args ...any) error {
	return &ParamError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// ParseFilter reads a listing's filters (status, webhook, event_id,
// doc_type, doc_name, since, until, cursor) from query parameters, as the
// API's GET /v1/deliveries and the console's deliveries page both name
// them. Limit is left to the caller.
func ParseFilter(q map[string]string) (Filter, error) {
	f := Filter{Webhook: q["webhook"], EventID: q["event_id"], DocType: q["doc_type"], DocName: q["doc_name"], Cursor: q["cursor"]}
	if f.DocName != "" && f.DocType == "" {
		return f, paramError("doc_name", "doc_name %q needs doc_type too: a document name is unique only within its doctype", f.DocName)
	}
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		v, ok := q[b.name]
		if !ok || v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, paramError(b.name, "%s %q is not an RFC 3339 time such as 2026-12-03T15:04:05Z", b.name, v)
		}
		*b.t = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return f, paramError("until", "until %s is not after since %s", q["until"], q["since"])
	}
	if s, ok := q["status"]; ok && s != "" {
		for _, st := range Statuses {
			if strings.EqualFold(s, st) {
				f.Status = st
			}
		}
		if f.Status == "" {
			return f, paramError("status", "status %q is not one of %s", s, strings.Join(Statuses, ", "))
		}
	}
	return f, nil
}
