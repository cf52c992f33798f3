// Package monitor serves asynqmon, asynq's web UI, for the Redis that holds
// Homing's queues: what is pending, scheduled, retrying or archived, with
// Homing's task payloads pretty-printed and anything that looks like a
// credential blanked out. It is read-only unless asked otherwise, because a
// click there can delete a delivery's only task.
package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
)

// Redacted replaces the value of a payload key that names a credential.
const Redacted = "[redacted]"

// UI is asynqmon's handler. It holds Redis connections: Close it when done.
type UI struct {
	h *asynqmon.HTTPHandler
}

// Handler serves the asynqmon UI and its API at "/" for the queues in
// redis. When readOnly is set, the API refuses every request but GET (405),
// so nothing can be deleted, run, archived or paused from the browser.
func Handler(redis asynq.RedisConnOpt, readOnly bool) *UI {
	return &UI{h: asynqmon.New(asynqmon.Options{
		RootPath:         "/",
		RedisConnOpt:     redis,
		ReadOnly:         readOnly,
		PayloadFormatter: asynqmon.PayloadFormatterFunc(FormatPayload),
	})}
}

// ServeHTTP serves one request of the UI or its API.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) { u.h.ServeHTTP(w, r) }

// Close releases the UI's Redis connections.
func (u *UI) Close() error { return u.h.Close() }

// FormatPayload shows a task payload in the UI. JSON (every Homing task type:
// webhook:event, webhook:deliver, webhook:retry, webhook:sweep) is indented,
// keeping its key order, with the value of any key naming a secret,
// password, token, API key, credential or authorization replaced by
// Redacted, however deep. Homing never puts those in a payload, but an
// event's document is the publisher's and may. Anything else is shown as
// asynqmon would.
func FormatPayload(taskType string, payload []byte) string {
	var compact bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := redact(dec, &compact); err != nil {
		return asynqmon.DefaultPayloadFormatter.FormatPayload(taskType, payload)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return asynqmon.DefaultPayloadFormatter.FormatPayload(taskType, payload) // trailing data
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return asynqmon.DefaultPayloadFormatter.FormatPayload(taskType, payload)
	}
	return out.String()
}

// redact copies one JSON value from dec to w, blanking sensitive keys'
// values. It walks tokens rather than decoding into a map so that the
// payload's key order survives.
func redact(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return writeJSON(w, tok)
	}
	switch delim {
	case '{':
		w.WriteByte('{')
		for i := 0; dec.More(); i++ {
			if i > 0 {
				w.WriteByte(',')
			}
			key, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := key.(string)
			if err := writeJSON(w, name); err != nil {
				return err
			}
			w.WriteByte(':')
			if sensitive(name) {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return err
				}
				_ = writeJSON(w, Redacted)
				continue
			}
			if err := redact(dec, w); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case '[':
		w.WriteByte('[')
		for i := 0; dec.More(); i++ {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := redact(dec, w); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// writeJSON writes a scalar token; json.Number keeps its digits.
func writeJSON(w *bytes.Buffer, v any) error {
	if n, ok := v.(json.Number); ok {
		w.WriteString(n.String())
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Write(b)
	return nil
}

// sensitive reports whether key names a credential. The words are matched
// inside the key lower-cased with '-' and '_' removed, so "X-Api-Key",
// "client_secret" and "accessToken" all match.
func sensitive(key string) bool {
	k := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(key))
	for _, w := range [...]string{"secret", "password", "passwd", "token", "apikey", "credential", "authorization", "privatekey"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
