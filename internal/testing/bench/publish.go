package main

import (
	"context"
	"time"

	"github.com/homingdev/homing/client"
)

// publishResult is one run of the publish scenario.
type publishResult struct {
	Events     int     `json:"events"`
	Goroutines int     `json:"goroutines"`
	PerSecond  float64 `json:"per_second"`
}

// runPublish publishes n events with client.Publish from this one process,
// on goroutines goroutines sharing one client, into Redis (no worker runs).
func (e *env) runPublish(ctx context.Context, n, goroutines int) (publishResult, error) {
	if err := e.reset(ctx); err != nil {
		return publishResult{}, err
	}
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		return publishResult{}, err
	}
	defer pub.Close()
	start := time.Now()
	if err := publishAll(ctx, pub, n, goroutines, benchDoc); err != nil {
		return publishResult{}, err
	}
	return publishResult{Events: n, Goroutines: goroutines, PerSecond: float64(n) / time.Since(start).Seconds()}, nil
}
