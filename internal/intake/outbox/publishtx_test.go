package outbox_test

import (
	"context"
	"testing"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// countRows counts the rows of model where cond holds.
func countRows(t *testing.T, dsn string, model any, cond string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := testenv.Open(t, dsn).Model(model).Where(cond, args...).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPublishTxFailsWithTheCallersTransaction: when the database goes away
// in the middle of the caller's transaction, PublishTx returns an error the
// caller can retry, the transaction cannot commit, and neither the business
// write nor the event is left behind.
func TestPublishTxFailsWithTheCallersTransaction(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	proxy, viaProxy := testenv.PostgresProxy(t, dsn)
	db := testenv.Open(t, viaProxy)
	ctx := context.Background()

	tx := db.WithContext(ctx).Begin()
	if err := tx.Exec("INSERT INTO tenants (name, created_at, updated_at) VALUES ('acme', now(), now())").Error; err != nil {
		t.Fatal(err) // the business write
	}
	proxy.Cut()
	_, err := client.PublishTx(ctx, tx, salesOrder("so-cut"))
	if err == nil || !client.IsRetryable(err) {
		t.Fatalf("PublishTx with the database cut away = %v; want a retryable error", err)
	}
	if err := tx.Commit().Error; err == nil {
		t.Fatal("the transaction committed after PublishTx failed")
	}
	proxy.Restore()
	if n := countRows(t, dsn, &models.Tenant{}, "name = ?", "acme"); n != 0 {
		t.Errorf("the business write survived: %d rows", n)
	}
	if n := countRows(t, dsn, &models.OutboxEvent{}, "event_id = ?", "so-cut"); n != 0 {
		t.Errorf("the event survived: %d outbox rows", n)
	}
}

// TestPublishTxOnADemotedPrimary: a primary demoted by a failover refuses
// the outbox write (25006); PublishTx's error is retryable, the caller's
// transaction is failed with it (its next statement is refused), and the
// same transaction run again once the database takes writes commits both.
func TestPublishTxOnADemotedPrimary(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	db := testenv.Open(t, dsn)
	ctx := context.Background()
	testenv.SetReadOnly(t, dsn, true)
	var err error
	testenv.Eventually(t, "PublishTx to fail on the read-only database", func() bool {
		tx := db.WithContext(ctx).Begin()
		defer tx.Rollback()
		if _, err = client.PublishTx(ctx, tx, salesOrder("so-demoted")); dbstate.Classify(err) != dbstate.ReadOnly {
			return false // a pooled session the demotion ended
		}
		if next := tx.Exec("INSERT INTO tenants (name, created_at, updated_at) VALUES ('acme', now(), now())").Error; next == nil {
			t.Fatal("the transaction went on after PublishTx failed")
		}
		return true
	})
	if !client.IsRetryable(err) {
		t.Fatalf("PublishTx on a read-only primary = %v; want a retryable error", err)
	}

	testenv.SetReadOnly(t, dsn, false)
	testenv.Eventually(t, "the transaction to commit once the database takes writes", func() bool {
		tx := db.WithContext(ctx).Begin()
		if _, err := client.PublishTx(ctx, tx, salesOrder("so-demoted")); err != nil {
			tx.Rollback()
			return false
		}
		if err := tx.Exec("INSERT INTO tenants (name, created_at, updated_at) VALUES ('acme', now(), now())").Error; err != nil {
			tx.Rollback()
			return false
		}
		return tx.Commit().Error == nil
	})
	if n := countRows(t, dsn, &models.OutboxEvent{}, "event_id = ?", "so-demoted"); n != 1 {
		t.Errorf("outbox rows = %d, want 1", n)
	}
}
