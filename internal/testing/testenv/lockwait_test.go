package testenv

import (
	"testing"
)

// A statement waiting on a held row lock is seen as a lock wait; one that
// returns is seen returning.
func TestReturnsWithoutLockWait(t *testing.T) {
	t.Parallel()
	db := Postgres(t)
	if err := db.Exec("CREATE TABLE held (id int PRIMARY KEY)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO held VALUES (1)").Error; err != nil {
		t.Fatal(err)
	}
	if !ReturnsWithoutLockWait(t, db, func() { _ = db.Exec("SELECT 1").Error }) {
		t.Fatal("a statement with no lock to wait for was taken for a lock wait")
	}
	tx := db.Begin()
	if err := tx.Exec("SELECT id FROM held WHERE id = 1 FOR UPDATE").Error; err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	if ReturnsWithoutLockWait(t, db, func() { waited <- db.Exec("SELECT id FROM held WHERE id = 1 FOR UPDATE").Error }) {
		t.Fatal("a statement waiting for a held row was not seen waiting")
	}
	tx.Rollback()
	if err := <-waited; err != nil {
		t.Fatalf("the waiting statement, once the lock was released: %v", err)
	}
}
