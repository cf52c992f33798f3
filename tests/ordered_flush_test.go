package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/models"
)

// TestOrderedDeliveryWithRedisFlushed: 50 documents × 4 versions through
// homing serve to an ordered webhook, with two schedulers running, the
// receiver answering 503 to a fifth of its first 150 requests, and Redis's
// data flushed once 100 events were accepted (the tasks of fan-outs, first
// attempts, wakes and retries in it are lost). Every version is accepted
// once, in order; none is requested before the one before it was accepted.
func TestOrderedDeliveryWithRedisFlushed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_OUTBOX_RECOVER_AFTER", "2s")
	var n atomic.Int64
	rc := newDocReceiver(t, func(string, int) int {
		if n.Add(1) <= 150 && rand.IntN(5) == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	s.ok(t, nil, "homing", "webhook", "create", "--name", "ordered", "--doctype", "Order", "--event", "on_update",
		"--url", rc.URL, "--max-retries", "100", "--timeout", receiverTimeout, "--ordering", "document")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)
	opt, err := redis.ParseURL(s.envValue("HOMING_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })

	const docs, versions, publishers, flushAt = 50, 4, 5, 100
	var (
		accepted atomic.Int64
		flushed  sync.Once
		wg       sync.WaitGroup
	)
	httpc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: publishers}}
	for p := range publishers {
		wg.Go(func() {
			for v := 1; v <= versions; v++ {
				for d := p; d < docs; d += publishers {
					postVersion(t, httpc, c, fmt.Sprintf("FL-%02d", d), v)
					if accepted.Add(1) == flushAt {
						flushed.Do(func() {
							if err := rdb.FlushDB(context.Background()).Err(); err != nil {
								t.Errorf("FLUSHDB: %v", err)
							}
							t.Logf("Redis flushed after %d events accepted and %d requests received", flushAt, len(rc.requests()))
						})
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	db := s.openDB(t)
	within(t, 4*time.Minute, "every version Delivered", func() (bool, string) {
		counts, err := statusCounts(db, "ordered")
		if err != nil {
			return false, err.Error()
		}
		return counts[models.StatusDelivered] == docs*versions, fmt.Sprintf("statuses %s, %d requests", countStatus(counts), len(rc.requests()))
	})
	s.stop()
	got := checkOrder(t, rc.requests())
	for d := range docs {
		if doc := fmt.Sprintf("FL-%02d", d); got[doc] != versions {
			t.Errorf("%s: versions 1..%d accepted, want 1..%d", doc, got[doc], versions)
		}
	}
}
