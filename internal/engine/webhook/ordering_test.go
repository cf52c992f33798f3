package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// A webhook is unordered unless asked; "document" is taken on PostgreSQL
// and refused on SQLite with an error naming PostgreSQL; any other value is
// refused naming the two allowed.
func TestOrderingIsNoneOrDocumentAndDocumentNeedsPostgres(t *testing.T) {
	t.Parallel()
	box, _ := secretbox.New("")
	in := func(name string, ordering *string) webhook.Input {
		return webhook.Input{Name: ptr(name), DocType: ptr("Sales Order"), Event: ptr("on_update"), URL: ptr("https://93.184.216.34/hook"), Ordering: ordering}
	}
	ctx := context.Background()

	pg := webhook.New(testenv.Postgres(t), box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	w, err := pg.Create(ctx, "", in("plain", nil))
	if err != nil || w.Ordering != models.OrderingNone || webhook.ViewOf(w).Ordering != "none" {
		t.Fatalf("default: ordering %q (%v), want none", w.Ordering, err)
	}
	if w, err = pg.Update(ctx, "", "plain", webhook.Input{Ordering: ptr("Document")}); err != nil || !w.Ordered() {
		t.Fatalf("update to document: %q, %v", w.Ordering, err)
	}
	_, err = pg.Create(ctx, "", in("odd", ptr("by-title")))
	var fe *webhook.FieldError
	if !errors.Is(err, webhook.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "ordering" || !strings.Contains(err.Error(), `"none" or "document"`) {
		t.Fatalf("a bad ordering: %v, want a refusal of field ordering naming none and document", err)
	}

	lite := webhook.New(testenv.SQLite(t), box, nil, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	_, err = lite.Create(ctx, "", in("ordered", ptr("document")))
	if !errors.Is(err, webhook.ErrInvalid) || !strings.Contains(err.Error(), "needs PostgreSQL") {
		t.Fatalf("document on SQLite: %v, want a refusal saying it needs PostgreSQL", err)
	}
	if _, err := lite.Create(ctx, "", in("unordered", ptr("none"))); err != nil {
		t.Fatalf("none on SQLite: %v", err)
	}
}
