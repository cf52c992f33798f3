package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/secretbox"
	"github.com/homingdev/homing/webhook"
)

func ptr[T any](v T) *T { return &v }

func TestGuardRefusesInternalURLsAtCreation(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	box, _ := secretbox.New("")
	svc := webhook.New(db, box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second, Guard: delivery.NewGuard(nil)}, nil)
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost/x", "http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://10.0.0.1/"} {
		_, err := svc.Create(context.Background(), webhook.Input{Name: ptr("w"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr(u)})
		if !errors.Is(err, webhook.ErrInvalid) || !errors.Is(err, delivery.ErrForbiddenTarget) || !strings.Contains(err.Error(), "allowed_networks") {
			t.Errorf("%s: %v, want a refusal naming delivery.allowed_networks", u, err)
		}
	}
	if _, err := svc.Create(context.Background(), webhook.Input{Name: ptr("ok"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("https://93.184.216.34/hook")}); err != nil {
		t.Fatalf("public address refused: %v", err)
	}
	if _, err := svc.Update(context.Background(), "ok", webhook.Input{URL: ptr("http://192.168.0.10/")}); !errors.Is(err, delivery.ErrForbiddenTarget) {
		t.Fatalf("update to a private address: %v", err)
	}
}
