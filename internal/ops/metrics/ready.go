package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Ready is the readiness check of a process that needs both the database and
// Redis: it pings both at once and names each one that does not answer, e.g.
// "redis: dial tcp 127.0.0.1:6379: connect: connection refused".
func Ready(db *gorm.DB, redisOpt asynq.RedisConnOpt) func(ctx context.Context) error {
	return ReadyWith(func(ctx context.Context) error { return pingDB(ctx, db) }, redisOpt)
}

// ReadyWith is Ready with the database's check given: a dbstate.Watcher's
// Ready, which also fails while a read-only primary answers pings.
func ReadyWith(database func(ctx context.Context) error, redisOpt asynq.RedisConnOpt) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var dbErr, redisErr error
		var wg sync.WaitGroup
		wg.Go(func() { dbErr = database(ctx) })
		wg.Go(func() { redisErr = pingRedis(ctx, redisOpt) })
		wg.Wait()
		return errors.Join(dbErr, redisErr)
	}
}

func pingDB(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// pingRedis uses a client of its own, closed after the ping, so that the
// check holds no connection between probes and sees what a new connection
// would.
func pingRedis(ctx context.Context, opt asynq.RedisConnOpt) error {
	client, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return fmt.Errorf("redis: unsupported connection options %T", opt)
	}
	defer func() { _ = client.Close() }()
	if err := client.Ping(ctx).Err(); err != nil {
		if addr := redisAddr(opt); addr != "" {
			// A deadline names no server; the operator needs which.
			return fmt.Errorf("redis: %w (at %s)", err, addr)
		}
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// redisAddr names the server(s) of opt.
func redisAddr(opt asynq.RedisConnOpt) string {
	switch o := opt.(type) {
	case asynq.RedisClientOpt:
		return o.Addr
	case *asynq.RedisClientOpt:
		return o.Addr
	case asynq.RedisFailoverClientOpt:
		return "sentinel master " + o.MasterName
	case asynq.RedisClusterClientOpt:
		return strings.Join(o.Addrs, ",")
	}
	return ""
}
