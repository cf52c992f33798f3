package dbstate_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/homingdev/homing/internal/intake/dbstate"
)

// sqliteErr has the shape of the SQLite driver's error: a result code.
type sqliteErr struct{ code int }

func (e sqliteErr) Error() string { return fmt.Sprintf("sqlite error %d", e.code) }
func (e sqliteErr) Code() int     { return e.code }

func TestClassify(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("write event: %w", &pgconn.PgError{Code: code}) }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		want dbstate.Kind
	}{
		{"nil", nil, dbstate.None},
		{"caller left", fmt.Errorf("query: %w", context.Canceled), dbstate.None},
		{"not the database's", errors.New("boom"), dbstate.None},
		{"a bare EOF", io.EOF, dbstate.None},

		{"connection refused", fmt.Errorf("query: %w", refused), dbstate.Unavailable},
		{"connection reset inside a transaction (pgx returns it bare)", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("read: connection reset by peer")}, dbstate.Unavailable},
		{"EOF mid-message", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), dbstate.Unavailable},
		{"network timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, dbstate.Timeout},

		{"connect refused", &pgconn.ConnectError{}, dbstate.Unavailable},
		{"bad connection", fmt.Errorf("exec: %w", driver.ErrBadConn), dbstate.Unavailable},
		{"class 08", pg("08006"), dbstate.Unavailable},
		{"08001 cannot connect", pg("08001"), dbstate.Unavailable},
		{"admin_shutdown", pg("57P01"), dbstate.Unavailable},
		{"crash_shutdown", pg("57P02"), dbstate.Unavailable},
		{"starting up / in recovery", pg("57P03"), dbstate.Unavailable},
		{"too many connections", pg("53300"), dbstate.Unavailable},

		{"demoted primary", pg("25006"), dbstate.ReadOnly},
		{"probe found read-only", fmt.Errorf("probe: %w", dbstate.ErrReadOnly), dbstate.ReadOnly},

		{"statement_timeout", pg("57014"), dbstate.Timeout},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), dbstate.Timeout},

		{"serialization failure", pg("40001"), dbstate.Conflict},
		{"deadlock", pg("40P01"), dbstate.Conflict},

		{"sqlite busy", sqliteErr{5}, dbstate.Busy},
		{"sqlite busy snapshot (extended code)", sqliteErr{517}, dbstate.Busy},
		{"sqlite locked", sqliteErr{6}, dbstate.Busy},
		{"sqlite constraint", sqliteErr{19}, dbstate.None},
		{"sqlite locked, by message", errors.New("database is locked (5) (SQLITE_BUSY)"), dbstate.Busy},

		{"unique violation", pg("23505"), dbstate.Other},
		{"undefined table", pg("42P01"), dbstate.Other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := dbstate.Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
			if got, want := dbstate.Retryable(tc.err), tc.want != dbstate.None && tc.want != dbstate.Other; got != want {
				t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, want)
			}
		})
	}
}

// TestKindsAreBounded keeps the metric's label set what the docs list.
func TestKindsAreBounded(t *testing.T) {
	t.Parallel()
	got := fmt.Sprint(dbstate.Kinds())
	if want := "[unavailable read_only timeout busy conflict other]"; got != want {
		t.Errorf("Kinds() = %s, want %s (update README's homing_database_errors_total row)", got, want)
	}
}
