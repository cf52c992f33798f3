package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// Concurrent creates in a tenant with max_webhooks 3 store exactly 3, and
// each refusal names the limit and how to raise it; another tenant and an
// import are held to their own limits.
func TestMaxWebhooksHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			tenants := tenant.New(db, nil, nil)
			if _, err := tenants.Create(ctx, "acme", tenant.Patch{MaxWebhooks: ptr(3)}); err != nil {
				t.Fatal(err)
			}
			box, _ := secretbox.New("")
			svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
			const tries = 8
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				errs []error
			)
			for i := range tries {
				wg.Go(func() {
					n := fmt.Sprintf("h%d", i)
					_, err := svc.Create(ctx, "acme", webhook.Input{Name: ptr(n), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://example.com/" + n)})
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				})
			}
			wg.Wait()
			var refused int
			for _, err := range errs {
				switch {
				case err == nil:
				case errors.Is(err, webhook.ErrLimit):
					refused++
					if !strings.Contains(err.Error(), "homing tenant update acme --max-webhooks N") || !strings.Contains(err.Error(), "max_webhooks 3") {
						t.Errorf("refusal does not say the limit and how to raise it: %v", err)
					}
				default:
					t.Errorf("create: %v", err)
				}
			}
			var stored int64
			if err := db.Model(&models.Webhook{}).Where("tenant = ?", "acme").Count(&stored).Error; err != nil {
				t.Fatal(err)
			}
			if stored != 3 || refused != tries-3 {
				t.Fatalf("stored %d webhooks and refused %d of %d creates; want 3 and %d", stored, refused, tries, tries-3)
			}
			// The default tenant has no limit.
			for i := range 5 {
				n := fmt.Sprintf("d%d", i)
				if _, err := svc.Create(ctx, "", webhook.Input{Name: ptr(n), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://example.com/" + n)}); err != nil {
					t.Fatal(err)
				}
			}
			// An import into the full tenant reports the record, not an error.
			res, err := svc.ImportFrappe(ctx, "acme", []webhook.FrappeWebhook{{Name: "imp", DocType: "D", DocEvent: "on_update", RequestURL: "https://example.com/imp"}}, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Status != webhook.ImportNotImported || !strings.Contains(strings.Join(res[0].NeedsHuman, ";"), "--max-webhooks") {
				t.Fatalf("import into a full tenant: %+v", res)
			}
			// Raising the limit lets one more in.
			if _, err := tenants.Update(ctx, "acme", tenant.Patch{MaxWebhooks: ptr(4)}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Create(ctx, "acme", webhook.Input{Name: ptr("more"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://example.com/more")}); err != nil {
				t.Fatalf("create after raising the limit: %v", err)
			}
		})
	}
}
