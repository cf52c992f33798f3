package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
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
