package event

import (
	"encoding/json"
	"testing"
)

// An event's TaskID names its tenant unless it is the default one, whose
// keeps the form queued tasks had before tenants; the two forms never meet.
func TestTaskIDNamesTheTenant(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ tenant, id, want string }{
		{"", "ev-1", "webhook_event::ev-1"},
		{"default", "ev-1", "webhook_event::ev-1"},
		{"acme", "ev-1", "webhook_event:acme:ev-1"},
		// Default's event "acme:ev-1" and acme's "ev-1" stay apart.
		{"", "acme:ev-1", "webhook_event::acme:ev-1"},
	} {
		if got := TaskID(c.tenant, c.id); got != c.want {
			t.Errorf("TaskID(%q, %q) = %q, want %q", c.tenant, c.id, got, c.want)
		}
	}
}

// The payload carries the tenant, omitted for the default one, so a task
// queued before tenants decodes as the default tenant's and a default
// tenant's payload is byte for byte what it was.
func TestPayloadCarriesTheTenant(t *testing.T) {
	t.Parallel()
	ev := Event{ID: "ev-1", DocType: "Sales Order", Event: "on_submit", Doc: map[string]any{"name": "SO-1"}}
	for _, c := range []struct{ tenant, want, field string }{{"", "", ""}, {"default", "", ""}, {"acme", "acme", "acme"}} {
		ev.Tenant = c.tenant
		b, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if got, _ := raw["tenant"].(string); got != c.field {
			t.Errorf("tenant %q encodes as %q: %s", c.tenant, got, b)
		}
		got, err := Decode(b)
		if err != nil || got.Tenant != c.want {
			t.Errorf("tenant %q decodes as %q (%v)", c.tenant, got.Tenant, err)
		}
		// The slow path (encoding/json) agrees.
		slow, err := decodeJSON(b)
		if err != nil || slow.Tenant != c.want {
			t.Errorf("tenant %q decodes slowly as %q (%v)", c.tenant, slow.Tenant, err)
		}
	}
	old := []byte(`{"id":"ev-1","doc_type":"Sales Order","event":"on_submit","doc":{"name":"SO-1"}}`)
	if got, err := Decode(old); err != nil || got.Tenant != "" {
		t.Errorf("a task queued before tenants decodes as tenant %q (%v), want the default", got.Tenant, err)
	}
	if _, err := Decode([]byte(`{"tenant":"Bad:Name","id":"ev-1","doc_type":"Sales Order","event":"on_submit","doc":{}}`)); err == nil {
		t.Error("a payload naming an impossible tenant decoded")
	}
}
