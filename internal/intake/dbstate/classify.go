// Package dbstate tells a database that is away from a request that is
// wrong, and keeps a process loud while the database is away: Classify sorts
// an error into a bounded Kind (a PostgreSQL failover is "unavailable" and
// then "read_only", never a bug), and a Watcher logs the outage once at
// ERROR when it starts and once at INFO when it ends, counts the errors by
// kind for homing_database_errors_total, and makes /readyz unready
// meanwhile.
//
// It imports only pgconn and the standard library, so package client can
// use it to mark its own errors retryable.
package dbstate

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Kind is what a database error says about the database, the kind label of
// homing_database_errors_total. The set is closed (Kinds).
type Kind string

// Kinds of database errors. None is an error that does not come from the
// database (or a caller that gave up: context.Canceled).
const (
	None Kind = ""
	// Unavailable: no connection (refused, reset, closed mid-statement),
	// or the server refuses work now: shutting down (57P01, 57P02),
	// starting up or in recovery (57P03), SQLSTATE class 08, too many
	// connections (53300).
	Unavailable Kind = "unavailable"
	// ReadOnly: connected to a server that cannot write (25006): a primary
	// demoted by a failover, a standby, default_transaction_read_only.
	ReadOnly Kind = "read_only"
	// Timeout: a statement or a connection attempt ran out of time
	// (57014 query_canceled, a deadline, a network timeout).
	Timeout Kind = "timeout"
	// Busy: SQLite's "database is locked" (SQLITE_BUSY, SQLITE_LOCKED).
	Busy Kind = "busy"
	// Conflict: a transaction lost to another (40001 serialization
	// failure, 40P01 deadlock); run again, it succeeds.
	Conflict Kind = "conflict"
	// Other: any other error the database reported (a constraint, a
	// missing table): not retryable.
	Other Kind = "other"
)

// Explain says what a retryable kind means for a request the database
// could not serve, for the API's database_unavailable and the console's
// 503 page; "" for None and Other.
func (k Kind) Explain() string {
	return map[Kind]string{
		Unavailable: "the database is unavailable (unreachable, shutting down or starting up: a failover, or a restart)",
		ReadOnly:    "the database is read-only (this server reached a primary that a failover demoted, or a standby)",
		Timeout:     "the database did not answer in time",
		Busy:        "the database is locked by another writer",
		Conflict:    "the database could not complete the request alongside a concurrent one",
	}[k]
}

// Kinds lists every Kind but None, so a metric can start each at zero.
func Kinds() []Kind { return []Kind{Unavailable, ReadOnly, Timeout, Busy, Conflict, Other} }

// Retryable reports whether the same request may succeed when made again
// shortly: every kind but None and Other.
func (k Kind) Retryable() bool { return k != None && k != Other }

// Outage reports whether the kind means the database is away for this
// process (not one slow or unlucky statement): Unavailable and ReadOnly.
// A Watcher changes state only on these.
func (k Kind) Outage() bool { return k == Unavailable || k == ReadOnly }

// Retryable reports whether err is a database error that a retry may get
// past: Classify(err).Retryable().
func Retryable(err error) bool { return Classify(err).Retryable() }

// ErrReadOnly is a probe's finding that the database it reached takes no
// writes (transaction_read_only is on); it classifies as ReadOnly.
var ErrReadOnly = errors.New("the database takes no writes (transaction_read_only is on: a primary demoted by a failover, a standby, or default_transaction_read_only)")

// sqlstateKinds maps PostgreSQL error codes to their kind; class 08 is
// matched by prefix in Classify.
var sqlstateKinds = map[string]Kind{
	"57P01": Unavailable, // admin_shutdown: the server is shutting down, or terminated this backend
	"57P02": Unavailable, // crash_shutdown
	"57P03": Unavailable, // cannot_connect_now: starting up, in recovery
	"57P05": Unavailable, // idle_session_timeout
	"53300": Unavailable, // too_many_connections
	"25006": ReadOnly,    // read_only_sql_transaction
	"57014": Timeout,     // query_canceled (statement_timeout)
	"40001": Conflict,    // serialization_failure
	"40P01": Conflict,    // deadlock_detected
}

// Classify says what err tells about the database. nil and
// context.Canceled (the caller left) are None.
func Classify(err error) Kind {
	if err == nil || errors.Is(err, context.Canceled) {
		return None
	}
	if errors.Is(err, ErrReadOnly) {
		return ReadOnly
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		// Whatever the server said (shutting down, not accepting
		// connections, too many clients), there is no connection.
		return Unavailable
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if k, ok := sqlstateKinds[pgErr.Code]; ok {
			return k
		}
		if strings.HasPrefix(pgErr.Code, "08") { // connection_exception
			return Unavailable
		}
		return Other
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	case isConnectionLost(err):
		return Unavailable
	case isSQLiteBusy(err):
		return Busy
	}
	return None
}

// isConnectionLost reports an error of a database connection that could not
// be made or broke: a failed connect, an error pgconn raised below the
// protocol (each carries SafeToRetry, true or false), database/sql's bad
// connection, and a network error or an EOF mid-message, which pgx returns
// bare when a connection breaks inside a transaction. Classify is for the
// errors of database calls: a network error of another kind (a client's
// request body) must be told apart before.
func isConnectionLost(err error) bool {
	var (
		connectErr *pgconn.ConnectError
		fromPgconn interface{ SafeToRetry() bool }
		netErr     net.Error
	)
	return errors.As(err, &connectErr) || errors.As(err, &fromPgconn) || errors.Is(err, driver.ErrBadConn) ||
		errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}

// SQLite's result codes for a database another connection holds.
const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

// isSQLiteBusy reports SQLite's busy and locked errors, by the driver's
// result code (its primary code is the low byte) or, for a driver that
// gives none, its message.
func isSQLiteBusy(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		c := coded.Code() & 0xff
		return c == sqliteBusy || c == sqliteLocked
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database table is locked")
}
