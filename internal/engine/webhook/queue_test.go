package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// A tenant's webhooks go on default or on a queue the operator listed for
// the tenant, never elsewhere (issue 35, finding 11): the refusal names the
// allowed queues and the command that adds one. A webhook left on a queue
// taken off the list still saves its other fields; the default tenant, the
// operator's own, chooses any queue.
func TestTenantWebhooksUseOnlyTheirQueues(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			tenants := tenant.New(db, nil, nil)
			if _, err := tenants.Create(ctx, "acme", tenant.Patch{}); err != nil {
				t.Fatal(err)
			}
			box, _ := secretbox.New("")
			svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
			in := func(name, queue string) webhook.Input {
				return webhook.Input{Name: ptr(name), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://example.com/" + name), Queue: ptr(queue)}
			}
			refusedQueue := func(what string, err error) {
				t.Helper()
				var fe *webhook.FieldError
				if !errors.As(err, &fe) || fe.Field != "queue" || !strings.Contains(err.Error(), "homing tenant update acme --queues") {
					t.Fatalf("%s: %v, want a refusal of the queue naming homing tenant update acme --queues", what, err)
				}
			}
			_, err := svc.Create(ctx, "acme", in("bulk-hook", "bulk"))
			refusedQueue("create on an unlisted queue", err)
			if _, err := svc.Create(ctx, "acme", in("plain", models.DefaultQueue)); err != nil {
				t.Fatalf("create on default: %v", err)
			}
			_, err = svc.Update(ctx, "acme", "plain", webhook.Input{Queue: ptr("bulk")})
			refusedQueue("move onto an unlisted queue", err)
			if w, _ := svc.Get(ctx, "acme", "plain"); w.Queue != models.DefaultQueue {
				t.Fatalf("a refused move left the webhook on %q", w.Queue)
			}

			if _, err := tenants.Update(ctx, "acme", tenant.Patch{Queues: &[]string{"bulk", "bulk", " slow "}}); err != nil {
				t.Fatal(err)
			}
			got, err := tenants.Get(ctx, "acme")
			if err != nil || strings.Join(got.Queues, ",") != "bulk,slow" {
				t.Fatalf("queues %v (%v), want bulk,slow", got.Queues, err)
			}
			if _, err := svc.Update(ctx, "acme", "plain", webhook.Input{Queue: ptr("bulk")}); err != nil {
				t.Fatalf("move onto a listed queue: %v", err)
			}
			if _, err := svc.Create(ctx, "acme", in("slow-hook", "slow")); err != nil {
				t.Fatalf("create on a listed queue: %v", err)
			}

			// Taken off the list: the webhook stays where it is and saves
			// its other fields with its queue sent back as it was, as a
			// form does; a move elsewhere is refused.
			if _, err := tenants.Update(ctx, "acme", tenant.Patch{Queues: &[]string{}}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Update(ctx, "acme", "plain", webhook.Input{Queue: ptr("bulk"), MaxRetries: ptr(5)}); err != nil {
				t.Fatalf("save with the queue as it was: %v", err)
			}
			_, err = svc.Update(ctx, "acme", "plain", webhook.Input{Queue: ptr("slow")})
			refusedQueue("move after the list emptied", err)

			for _, bad := range []string{"homing_system", "two words"} {
				if _, err := tenants.Update(ctx, "acme", tenant.Patch{Queues: &[]string{bad}}); !errors.Is(err, tenant.ErrInvalid) {
					t.Fatalf("queue %q: %v, want ErrInvalid", bad, err)
				}
			}
			if _, err := svc.Create(ctx, "", in("ops", "anything")); err != nil {
				t.Fatalf("the default tenant on any queue: %v", err)
			}
		})
	}
}
