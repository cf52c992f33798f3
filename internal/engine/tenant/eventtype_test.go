package tenant_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestParseEventType: a pair is Doctype:event with an event of the
// doctype's events; anything else is refused saying what to write.
func TestParseEventType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Sales Order:on_submit":     "Sales Order:on_submit",
		" Sales Order : on_cancel ": "Sales Order:on_cancel",
		"Ns:Doc:on_update":          "Ns:Doc:on_update", // a doctype may hold a colon
		"Homing Webhook:failing":    "Homing Webhook:failing",
	} {
		got, err := tenant.ParseEventType(in)
		if err != nil || got.String() != want {
			t.Errorf("%q: %v, %v; want %s", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		"Sales Order":                           "must be Doctype:event",
		":on_submit":                            "must be Doctype:event",
		"Sales Order:submitted":                 `"submitted" is not one of after_insert`,
		"Homing Webhook:on_submit":              `"on_submit" is not one of failing`,
		strings.Repeat("x", 141) + ":on_update": "1 to 140 printable characters",
	} {
		_, err := tenant.ParseEventType(in)
		if !errors.Is(err, tenant.ErrInvalid) || !strings.Contains(err.Error(), says) {
			t.Errorf("%.30q: %v; want ErrInvalid saying %q", in, err, says)
		}
	}
}

// TestPortalSettings: portal_advanced and event_types are kept, event
// types written alike and once, a bad one refused naming it, and an update
// of another setting leaves them as they are.
func TestPortalSettings(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc := tenant.New(open(t), nil, nil)
			ctx := context.Background()
			on, types := true, []string{"Invoice:on_submit", " Invoice : on_submit", "Customer:after_insert"}
			got, err := svc.Create(ctx, "acme", tenant.Patch{PortalAdvanced: &on, EventTypes: &types})
			if err != nil {
				t.Fatal(err)
			}
			if !got.PortalAdvanced || !slices.Equal(got.EventTypes, []string{"Invoice:on_submit", "Customer:after_insert"}) {
				t.Errorf("created %+v", got)
			}
			bad := []string{"Invoice:paid"}
			if _, err := svc.Update(ctx, "acme", tenant.Patch{EventTypes: &bad}); !errors.Is(err, tenant.ErrInvalid) || !strings.Contains(err.Error(), `"Invoice:paid"`) {
				t.Errorf("bad event type: %v", err)
			}
			rate := 3
			if _, err := svc.Update(ctx, "acme", tenant.Patch{ActionRate: &rate}); err != nil {
				t.Fatal(err)
			}
			if got, err = svc.Get(ctx, "acme"); err != nil || !got.PortalAdvanced || len(got.EventTypes) != 2 || got.ActionRate != 3 {
				t.Errorf("after another update: %+v, %v", got, err)
			}
			off, none := false, []string{}
			if got, err = svc.Update(ctx, "acme", tenant.Patch{PortalAdvanced: &off, EventTypes: &none}); err != nil || got.PortalAdvanced || len(got.EventTypes) != 0 {
				t.Errorf("turned off: %+v, %v", got, err)
			}
		})
	}
}
