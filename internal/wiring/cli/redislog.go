package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/config"
)

// routeRedisLogs sends go-redis's own messages (connection pool dial
// failures, mostly) through log at level, instead of go-redis's default of
// unstructured lines on stderr. go-redis keeps one logger per process; the
// swap is atomic. The one-shot commands route them at debug level, because
// the error they return already says what failed.
//
// TODO: this adapter belongs in package logging, beside logging.Asynq.
func routeRedisLogs(log *slog.Logger, level slog.Level) {
	redis.SetLogger(redisLogger{log: log.With("component", "redis"), level: level})
}

type redisLogger struct {
	log   *slog.Logger
	level slog.Level
}

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, l.level, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// redisUnreachable turns an error that is Redis refusing or not answering a
// connection into the one line a user can act on, "redis at
// 127.0.0.1:6379 is not reachable: connection refused; start it or set
// HOMING_REDIS_URL", instead of asynq's "UNKNOWN: redis command error: SADD
// failed: dial tcp …". Other errors are returned as they are.
func redisUnreachable(r config.Redis, err error) error {
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" {
		return err
	}
	where := "redis"
	switch {
	case len(r.Cluster.Addrs) > 0:
		where = "redis cluster " + strings.Join(r.Cluster.Addrs, ",")
	case r.Sentinel.Master != "":
		where = "redis sentinel " + strings.Join(r.Sentinel.Addrs, ",")
	default:
		if u, perr := url.Parse(r.URL); perr == nil && u.Host != "" {
			where = "redis at " + u.Host
		}
	}
	why := op.Err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case op.Timeout():
		why = "no answer (timeout)"
	}
	return &messageError{
		msg: fmt.Sprintf("%s is not reachable: %s; start it or set %s", where, why, config.EnvName("redis.url")),
		err: err,
	}
}
