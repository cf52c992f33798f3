package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/event"
)

// Error codes: stable strings clients may switch on. Each goes with one
// HTTP status.
const (
	CodeUnauthorized        = "unauthorized"         // 401: no token, a malformed header, or a token that is not valid
	CodeForbidden           = "forbidden"            // 403: the token's scope does not allow the endpoint
	CodeNotFound            = "not_found"            // 404
	CodeMethodNotAllowed    = "method_not_allowed"   // 405, with Allow
	CodeConflict            = "conflict"             // 409: a webhook name taken, a delivery in a state that forbids it
	CodeTenantDisabled      = "tenant_disabled"      // 409: the tenant is disabled: it accepts no events and sends nothing (its deliveries are kept) until it is enabled again
	CodePayloadTooLarge     = "payload_too_large"    // 413: the body over api.max_body_bytes, or doc over delivery.max_payload_bytes
	CodeInvalidJSON         = "invalid_json"         // 400: not JSON, not the request's shape, or an unknown field
	CodeInvalidRequest      = "invalid_request"      // 422: well-formed, but a value is not acceptable
	CodeDeliveryFailed      = "delivery_failed"      // 502: a workflow_transition event did not reach every webhook
	CodeUnavailable         = "unavailable"          // 503, with Retry-After: the server cannot do it now (past its memory ceiling, api.max_inflight_bytes full, or too busy to evaluate a definition within its time limit)
	CodeRateLimited         = "rate_limited"         // 429, with Retry-After: the tenant's publish_rate or action_rate (resends, retries, recovers, test sends) is spent, or a webhook's test sends (one a second)
	CodeTenantShareFull     = "tenant_share_full"    // 429, with Retry-After: the tenant's requests in flight hold its share of api.max_inflight_bytes (api.tenant_inflight_share); other tenants are not refused
	CodeDatabaseUnavailable = "database_unavailable" // 503, with Retry-After: the database is unreachable, shutting down, starting up, read-only (a failover), or busy; nothing is lost by retrying
	CodeInternal            = "internal"             // 500
)

// Error is an API error response. Handlers return it (or an error of the
// services, which writeError maps to one).
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field at fault (a JSON field, a query
	// parameter or a header), when there is one.
	Field string `json:"field,omitempty"`
	// EventID and Failures are set on delivery_failed.
	EventID  string                 `json:"event_id,omitempty"`
	Failures []event.WebhookFailure `json:"failures,omitempty"`
	// RetryAfter, in seconds, is sent as Retry-After when set.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errorBody is the JSON of every error response.
type errorBody struct {
	Error *Error `json:"error"`
}

func errorf(status int, code, field, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func invalidRequest(field, format string, args ...any) *Error {
	return errorf(http.StatusUnprocessableEntity, CodeInvalidRequest, field, format, args...)
}

func notFound(format string, args ...any) *Error {
	return errorf(http.StatusNotFound, CodeNotFound, "", format, args...)
}

func conflict(format string, args ...any) *Error {
	return errorf(http.StatusConflict, CodeConflict, "", format, args...)
}

func bodyTooLarge(limit int64) *Error {
	return errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "",
		"request body is larger than %d bytes (api.max_body_bytes)", limit)
}

// apiError maps an error to its response. Errors the API does not know are
// internal: their text stays in the log and never reaches the client.
func apiError(err error) *Error {
	var (
		ae  *Error
		mbe *http.MaxBytesError
		efe *event.FieldError
		se  *event.SyncError
		wfe *webhook.FieldError
		wre *webhook.RateError
		are *tenant.ActionRateError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return bodyTooLarge(mbe.Limit)
	case errors.As(err, &efe):
		if efe.TooLarge {
			return errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, efe.Field, "%s", efe.Message)
		}
		return invalidRequest(efe.Field, "%s", efe.Message)
	case errors.As(err, &se):
		return &Error{Status: http.StatusBadGateway, Code: CodeDeliveryFailed, Message: se.Error(), EventID: se.EventID, Failures: se.Failures}
	case errors.As(err, &wfe):
		field := webhookField(wfe.Field)
		return invalidRequest(field, "%s", field+strings.TrimPrefix(wfe.Message, wfe.Field))
	case errors.Is(err, budget.ErrOverloaded):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 5,
			Message: "the server is past its memory ceiling (process.memory_limit) and cannot evaluate this now; try again shortly"}
	case errors.Is(err, budget.ErrTimeLimit):
		// Time is not the definition's alone: a cheap one passes the limit
		// on a loaded server, so this is no refusal.
		msg := err.Error()
		if !strings.Contains(msg, "try again") {
			msg += " (the server was too busy, or the definition is too slow); try again shortly"
		}
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 5, Message: msg}
	case errors.As(err, &are):
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(are.RetryAfter.Seconds())), Message: are.Error()}
	case errors.As(err, &wre):
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(wre.RetryAfter.Seconds())), Message: wre.Error()}
	case errors.Is(err, webhook.ErrNoSender):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()}
	case errors.Is(err, tenant.ErrDisabled):
		return errorf(http.StatusConflict, CodeTenantDisabled, "", "%s", err.Error())
	case errors.Is(err, webhook.ErrLimit):
		return conflict("%s", err.Error())
	case errors.Is(err, webhook.ErrExists):
		return conflict("%s", strings.Replace(err.Error(), " (choose another name, or use webhook update)", " (choose another name, or PATCH the existing one)", 1))
	case dbstate.Retryable(err):
		return databaseUnavailable(dbstate.Classify(err))
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error; the server log has the details"}
}

// databaseUnavailable answers a request the database could not serve now:
// 503 with Retry-After, never 500 (the request was fine) and never a 2xx
// (nothing the answer would promise is stored). Repeating the request is
// safe: a publish carries its event ID, and an ID stored by a commit whose
// answer was lost is answered 200 on the repeat.
func databaseUnavailable(k dbstate.Kind) *Error {
	why := k.Explain()
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeDatabaseUnavailable, RetryAfter: int(dbstate.RetryAfter / time.Second),
		Message: why + "; try again after Retry-After seconds (a publish with the same event ID is safe to repeat)"}
}

// webhookField is the JSON name of a webhook input field the webhook
// package names as the command line's flag.
func webhookField(flag string) string {
	switch flag {
	case "max-retries":
		return "max_retries"
	case "field":
		return "fields"
	case "header":
		return "headers"
	}
	return flag
}

// writeError writes err as the API's JSON error and logs what the client
// does not see.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := apiError(err)
	kind := s.cfg.Database.Observe(err)
	switch {
	case kind.Outage() && s.cfg.Database != nil:
		// The watcher logs the outage once, not once per request.
		s.log.Debug("api request refused: database away", "method", r.Method, "path", r.URL.Path, "kind", string(kind), "error", err.Error())
	case e.Code == CodeDatabaseUnavailable:
		s.log.Warn("api request refused: database busy", "method", r.Method, "path", r.URL.Path, "kind", string(kind), "error", err.Error())
	case e.Status >= 500 && e.Code == CodeInternal:
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			s.log.Info("api request abandoned by the client", "method", r.Method, "path", r.URL.Path)
		} else {
			s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		}
	default:
		s.log.Debug("api request refused", "method", r.Method, "path", r.URL.Path, "status", e.Status, "code", e.Code, "message", e.Message)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, errorBody{Error: e})
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// Read by programs and served with nosniff: no need to escape <, >, &.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // the API's own types always encode
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":{"code":"internal","message":"cannot encode the response"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
