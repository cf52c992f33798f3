// Package ratelimit keeps each webhook's rate_limit in Redis, so that every
// worker process draws on one budget: a GCRA limiter (go-redis/redis_rate)
// per webhook, allowing bursts of at most one second's worth.
package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// keyPrefix names the limiter keys in Redis, beside asynq's;
// publishPrefix names the tenants' publish_rate keys.
const (
	keyPrefix     = "homing:rate:"
	publishPrefix = "homing:publish:"
)

// Limiter answers dispatch's Limiter from Redis.
type Limiter struct {
	l *redis_rate.Limiter
}

// New builds a Limiter on rdb, the Redis that asynq uses.
func New(rdb redis.UniversalClient) *Limiter {
	return &Limiter{l: redis_rate.NewLimiter(rdb)}
}

// Allow takes one request from webhookID's budget of perSecond a second and
// answers 0, or answers how long until one is free.
func (l *Limiter) Allow(ctx context.Context, webhookID string, perSecond int) (time.Duration, error) {
	return l.allow(ctx, keyPrefix+webhookID, perSecond)
}

// Spend takes the whole of webhookID's budget (the key Allow is given) for
// d, as one request at a rate of one per d would: its next Allow at one a
// second waits about d. For tests that need a budget spent whatever the
// machine's speed: two requests a second apart on a loaded machine are
// not.
func (l *Limiter) Spend(ctx context.Context, webhookID string, d time.Duration) error {
	key := keyPrefix + webhookID
	// Reset first: a budget partly used (a request a moment ago) would
	// refuse the spending request, and leave the budget as it was.
	if err := l.l.Reset(ctx, key); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	res, err := l.l.Allow(ctx, key, redis_rate.Limit{Rate: 1, Burst: 1, Period: d})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if res.Allowed == 0 {
		return fmt.Errorf("spend the budget of %q: refused just after its reset", webhookID)
	}
	return nil
}

// AllowPublish takes one event from tenant's publish_rate of perSecond a
// second, shared by every serve process, and answers 0, or how long until
// one is free.
func (l *Limiter) AllowPublish(ctx context.Context, tenant string, perSecond int) (time.Duration, error) {
	return l.allow(ctx, publishPrefix+tenant, perSecond)
}

func (l *Limiter) allow(ctx context.Context, key string, perSecond int) (time.Duration, error) {
	res, err := l.l.Allow(ctx, key, redis_rate.PerSecond(perSecond))
	if err != nil {
		return 0, fmt.Errorf("redis: %w", err)
	}
	if res.Allowed > 0 {
		return 0, nil
	}
	return max(res.RetryAfter, time.Millisecond), nil
}
