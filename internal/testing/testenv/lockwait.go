package testenv

import (
	"testing"
	"time"

	"gorm.io/gorm"
)

// ReturnsWithoutLockWait runs fn and waits until it returns, or until a
// session of db's PostgreSQL database is seen waiting on a lock, whichever
// comes first; it reports whether fn returned. For a test that holds a
// lock and asserts that fn does not wait for it: both outcomes are events,
// where a timeout would be a guess at how long fn may take on a loaded
// machine. When it reports false, fn is still running: the caller releases
// its lock (a rollback in a cleanup will do) and fn ends then.
func ReturnsWithoutLockWait(t testing.TB, db *gorm.DB, fn func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	for {
		select {
		case <-done:
			return true
		default:
		}
		var waiting int64
		if err := db.Raw(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting).Error; err != nil {
			t.Fatalf("testenv: read lock waits: %v", err)
		}
		if waiting > 0 {
			select {
			case <-done: // it returned as the wait was seen: not a wait of fn's
				return true
			default:
				return false
			}
		}
		time.Sleep(10 * time.Millisecond) // a poll interval: both ends are events
	}
}
