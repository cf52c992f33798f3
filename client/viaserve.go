package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/homingdev/homing/internal/intake/event"
)

// ViaServe delivers workflow_transition events through homing serve: it
// posts each to POST /v1/events, which delivers it synchronously and answers
// 200 once every matching webhook took it, or 502 naming those that did not.
// The client stays free of the engine; the price is one more hop, and
// homing serve must be reachable from the publisher.
type ViaServe struct {
	// URL is homing serve's base URL, such as http://127.0.0.1:8088.
	URL string
	// Token is an API token (the publish scope is enough).
	Token string
	// HTTPClient sends the request; nil means http.DefaultClient. The
	// request lasts as long as the slowest receiver (up to its webhook's
	// timeout): bound it with the context given to Publish.
	HTTPClient *http.Client
}

// DeliverNow posts ev to homing serve and returns nil on 200, a *SyncError
// on 502, and an error with serve's message otherwise. When serve cannot be
// reached, or answers 503 (its database is away: a failover) or 429, the
// error is a *RetryableError (IsRetryable) carrying serve's Retry-After:
// repeating the event ID sends nothing twice.
func (v ViaServe) DeliverNow(ctx context.Context, ev event.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(v.URL, "/")+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("ViaServe.URL %q: %w", v.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+v.Token)
	hc := v.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return transportError(fmt.Errorf("deliver event %s through homing serve: %w", ev.ID, err))
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("deliver event %s through homing serve: read the answer: %w", ev.ID, err)
	}
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var answer struct {
		Error struct {
			Code     string                 `json:"code"`
			Message  string                 `json:"message"`
			EventID  string                 `json:"event_id"`
			Failures []event.WebhookFailure `json:"failures"`
		} `json:"error"`
	}
	var failed error
	switch {
	case json.Unmarshal(raw, &answer) != nil || answer.Error.Code == "":
		failed = fmt.Errorf("deliver event %s through homing serve: %s answered %s", ev.ID, v.URL, resp.Status)
	case resp.StatusCode == http.StatusBadGateway && len(answer.Error.Failures) > 0:
		return &SyncError{EventID: answer.Error.EventID, Failures: answer.Error.Failures}
	default:
		failed = fmt.Errorf("deliver event %s through homing serve: %s: %s", ev.ID, answer.Error.Code, answer.Error.Message)
	}
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
		return retryable(failed, retryAfterHeader(resp.Header))
	}
	return failed
}
