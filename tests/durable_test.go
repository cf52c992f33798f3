package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// TestRedisFlushedMidRun posts 2,000 events to `homing serve` while a
// worker and the scheduler run, and empties the system's Redis database
// (FLUSHDB of its own index: what a restart without persistence does) once
// about a third of them are accepted. Every accepted event is delivered
// exactly once: the outbox keeps each event until its fan-out has
// committed, and the relay queues again those whose task Redis lost.
// receiverTimeout is the webhooks' timeout in the tests that count every
// receipt exactly once: their receiver answers at once, so a request that
// times out is a machine too busy to run it, and its retry (a second receipt
// by design, not by Homing's machinery) would fail them for the machine's
// speed. Out of reach, as the hostile tests' time limits are.
const receiverTimeout = "1m"

func TestRedisFlushedMidRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_OUTBOX_RECOVER_AFTER", "2s")
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	s.ok(t, nil, "homing", "webhook", "create", "--name", "durable", "--doctype", "Order", "--event", "on_submit",
		"--url", rc.URL, "--max-retries", "100", "--timeout", receiverTimeout)
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)

	opt, err := redis.ParseURL(s.envValue("HOMING_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })

	const events, posters, flushAt = 2000, 16, 700
	ids := make(chan string)
	go func() {
		defer close(ids)
		for i := range events {
			ids <- fmt.Sprintf("flush-%04d", i)
		}
	}()
	var (
		accepted atomic.Int64
		flushed  sync.Once
		wg       sync.WaitGroup
	)
	httpc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: posters}}
	for range posters {
		wg.Go(func() {
			for id := range ids {
				body := fmt.Sprintf(`{"id": %q, "doc_type": "Order", "doc_name": %q, "event": "on_submit", "doc": {"name": %q}}`, id, id, id)
				req, _ := http.NewRequest("POST", c.base+"/v1/events", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+c.token)
				resp, err := httpc.Do(req)
				if err != nil {
					t.Errorf("POST %s: %v", id, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Errorf("POST %s: %d, want 202", id, resp.StatusCode)
					return
				}
				if accepted.Add(1) == flushAt {
					flushed.Do(func() {
						if err := rdb.FlushDB(context.Background()).Err(); err != nil {
							t.Errorf("FLUSHDB: %v", err)
						}
						t.Logf("Redis flushed after %d events accepted and %d received", flushAt, len(rc.Requests()))
					})
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	db := s.openDB(t)
	within(t, 3*time.Minute, "every accepted event Delivered", func() (bool, string) {
		counts, err := statusCounts(db, "durable")
		if err != nil {
			return false, err.Error()
		}
		return counts[models.StatusDelivered] == events, fmt.Sprintf("statuses %s, %d received", countStatus(counts), len(okByID(rc.Requests())))
	})
	var left int64
	eventually(t, "the outbox to be empty", func() (bool, string) {
		if err := db.Model(&models.OutboxEvent{}).Count(&left).Error; err != nil {
			return false, err.Error()
		}
		return left == 0, fmt.Sprintf("%d events not released", left)
	})
	s.stop()

	rows := deliveriesOf(t, db, "durable")
	ok := okByID(rc.Requests())
	byEvent := map[string]int{}
	for _, d := range rows {
		byEvent[d.EventID]++
		if ok[d.ID] != 1 {
			t.Errorf("delivery %s of event %s was received %d times, want once", d.ID, d.EventID, ok[d.ID])
		}
	}
	for i := range events {
		if id := fmt.Sprintf("flush-%04d", i); byEvent[id] != 1 {
			t.Errorf("event %s has %d deliveries, want 1", id, byEvent[id])
		}
	}
	if n := len(rc.Requests()); n != events {
		t.Errorf("the receiver got %d requests, want %d", n, events)
	}
}
