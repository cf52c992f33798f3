package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Spend leaves a budget spent for its duration whatever was taken from it
// just before: a request a moment ago (the budget partly used) does not
// keep it from being spent, and the next request at one a second waits
// about the duration.
func TestSpendLeavesTheBudgetSpent(t *testing.T) {
	t.Parallel()
	opt, _ := testenv.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: opt.Addr, DB: opt.DB})
	t.Cleanup(func() { _ = rdb.Close() })
	l := ratelimit.New(rdb)
	ctx := context.Background()
	if wait, err := l.Allow(ctx, "test:w", 1); err != nil || wait != 0 {
		t.Fatalf("first request: wait %s, %v; want it allowed", wait, err)
	}
	if err := l.Spend(ctx, "test:w", time.Hour); err != nil {
		t.Fatal(err)
	}
	wait, err := l.Allow(ctx, "test:w", 1)
	if err != nil || wait < 59*time.Minute {
		t.Fatalf("a request after Spend for an hour: wait %s, %v; want about an hour", wait, err)
	}
}
