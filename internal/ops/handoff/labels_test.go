package handoff_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// One tenant creating or renaming webhooks fills its own share of the
// webhook labels, not every tenant's (issue 35, finding 10); the default
// tenant is bounded by the total only, as an install without tenants was;
// a tenant past the tenant bound is other with all its webhooks; and other
// takes no slot.
func TestLabelsShareTheWebhookSlotsPerTenant(t *testing.T) {
	t.Parallel()
	type call struct{ tenant, webhook, wantTenant, wantWebhook string }
	noisy := func(from, to int) []call {
		var out []call
		for i := from; i < to; i++ {
			want := fmt.Sprintf("w%d", i)
			if i >= 3 {
				want = handoff.Other
			}
			out = append(out, call{"noisy", fmt.Sprintf("w%d", i), "noisy", want})
		}
		return out
	}
	tests := []struct {
		name                      string
		tenants, webhooks, perTen int
		calls                     []call
	}{
		{"a renaming tenant keeps to its share", 10, 10, 3, append(noisy(0, 50),
			call{"quiet", "orders", "quiet", "orders"},
			call{"noisy", "w1", "noisy", "w1"}, // kept for the life of the process
		)},
		{"the default tenant has no share of its own", 10, 5, 2, []call{
			{"", "a", "default", "a"}, {"default", "b", "default", "b"}, {"", "c", "default", "c"},
			{"acme", "x", "acme", "x"}, {"acme", "y", "acme", "y"}, {"acme", "z", "acme", handoff.Other},
			{"", "d", "default", handoff.Other}, // the total of 5 is reached
		}},
		{"the total bounds every tenant", 10, 2, 0, []call{
			{"a", "1", "a", "1"}, {"b", "1", "b", "1"}, {"c", "1", "c", handoff.Other},
		}},
		{"past the tenant bound, tenant and webhook are other", 1, 10, 5, []call{
			{"a", "1", "a", "1"}, {"b", "1", handoff.Other, handoff.Other}, {"a", "2", "a", "2"},
		}},
		{"other takes no slot", 1, 1, 1, []call{
			{handoff.Other, handoff.Other, handoff.Other, handoff.Other},
			{"a", handoff.Other, "a", handoff.Other}, {"a", "1", "a", "1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := handoff.NewLabels(tt.tenants, tt.webhooks, tt.perTen)
			for _, c := range tt.calls {
				ten, hook := l.Of(c.tenant, c.webhook)
				if ten != c.wantTenant || hook != c.wantWebhook {
					t.Errorf("Of(%q, %q) = %q, %q; want %q, %q", c.tenant, c.webhook, ten, hook, c.wantTenant, c.wantWebhook)
				}
			}
		})
	}
}

// The sending side holds the same bound: a process without metrics (homing
// serve) handing off the outcomes of a tenant that renamed its webhook 200
// times adds a bounded number of fields to the Redis hashes, not one per
// name (issue 35, finding 10).
func TestHandoffBoundsTheHashFields(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	// The defaults: metrics.max_webhook_labels_per_tenant is 25.
	h := handoff.New(rdb, nil)
	for i := range 200 {
		name := fmt.Sprintf("renamed-%d", i)
		h.Deliveries("noisy", name, "Delivered", "accepted", 1)
		h.Attempt("noisy", name, "2xx", 0, "", "")
	}
	h.Flush()
	ctx := context.Background()
	outcomes, err := rdb.HLen(ctx, handoff.Key).Result()
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := rdb.HLen(ctx, handoff.AttemptsKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	// 25 names of its own and other.
	if outcomes != 26 || attempts != 26 {
		t.Fatalf("%d outcome and %d attempt fields for 200 names, want 26 each (25 names and other)", outcomes, attempts)
	}
	got, err := h.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, c := range got {
		if c.Status != "" {
			total += c.N
		}
	}
	if total != 200 {
		t.Fatalf("%d outcomes drained, want all 200 (bounded labels, not lost counts)", total)
	}
}
