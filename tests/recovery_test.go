package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// TestRedisFlushedBeforeTheWorkerStarts is issue 25's reproduction at test
// scale: events accepted over the HTTP API by `homing serve` while no worker
// runs, the system's Redis database flushed (its tasks are gone), then a
// worker started, with serve's relay and the scheduler's both recovering at
// the defaults (but for the intervals shrunk below for test time). Nothing
// was in flight when Redis lost its data, so every event arrives exactly
// once, and within the recovery window docs/operations.md states:
// recover_after plus a quarter of it (the relays' look-up tick), plus the
// drain.
func TestRedisFlushedBeforeTheWorkerStarts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	const (
		events       = 1000
		posters      = 16
		recoverAfter = 4 * time.Second
		// drainBudget is what recovery may take beyond finding the lost
		// tasks: fanning out and sending 1,000 events on a shared CI host.
		drainBudget = 30 * time.Second
	)
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_OUTBOX_RECOVER_AFTER", recoverAfter.String())
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "5m,30m,2h,5h,10h,10h") // the default
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	s.ok(t, nil, "homing", "webhook", "create", "--name", "flushed", "--doctype", "Order", "--event", "on_submit",
		"--url", rc.URL)
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)

	ids := make(chan string)
	go func() {
		defer close(ids)
		for i := range events {
			ids <- fmt.Sprintf("idle-%04d", i)
		}
	}()
	httpc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: posters}}
	var wg sync.WaitGroup
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
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	db := s.openDB(t)
	eventually(t, "every event queued in Redis", func() (bool, string) {
		var unqueued int64
		if err := db.Model(&models.OutboxEvent{}).Where("queued_at IS NULL").Count(&unqueued).Error; err != nil {
			return false, err.Error()
		}
		return unqueued == 0, fmt.Sprintf("%d events not queued", unqueued)
	})

	// The events sit in Redis a while, as in the report: the relays look at
	// each one (its task still waits) and mark it looked at.
	var firstQueued time.Time
	if err := db.Model(&models.OutboxEvent{}).Select("max(queued_at)").Scan(&firstQueued).Error; err != nil {
		t.Fatal(err)
	}
	eventually(t, "every event looked at by a relay", func() (bool, string) {
		var notLooked int64
		if err := db.Model(&models.OutboxEvent{}).Where("queued_at <= ?", firstQueued).Count(&notLooked).Error; err != nil {
			return false, err.Error()
		}
		return notLooked == 0, fmt.Sprintf("%d events not looked at since queued", notLooked)
	})

	opt, err := redis.ParseURL(s.envValue("HOMING_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatalf("FLUSHDB: %v", err)
	}
	start := time.Now()
	s.start("worker", "worker started")
	// The lost tasks are found within recover_after and a quarter of it
	// of their last look (docs/operations.md); the rest is the drain.
	window := recoverAfter + recoverAfter/4 + drainBudget
	within(t, window, "every accepted event Delivered", func() (bool, string) {
		counts, err := statusCounts(db, "flushed")
		if err != nil {
			return false, err.Error()
		}
		return counts[models.StatusDelivered] == events, fmt.Sprintf("statuses %s, %d requests received%s", countStatus(counts), rc.Count(), stuck(db, "flushed"))
	})
	t.Logf("%d events delivered %s after the worker started", events, time.Since(start).Round(10*time.Millisecond))
	eventually(t, "the outbox to be empty", func() (bool, string) {
		var left int64
		if err := db.Model(&models.OutboxEvent{}).Count(&left).Error; err != nil {
			return false, err.Error()
		}
		return left == 0, fmt.Sprintf("%d events not released", left)
	})
	s.stop()

	assertOnceEach(t, deliveriesOf(t, db, "flushed"), rc.Requests(), "idle-%04d", events)
}

// assertOnceEach checks what the receiver got: one delivery per event
// (fmt.Sprintf(idFormat, i) for i below events), each received exactly
// once, and no other request.
func assertOnceEach(t *testing.T, rows []models.Delivery, got []testreceiver.Request, idFormat string, events int) {
	t.Helper()
	received := map[string]int{}
	for _, r := range got {
		received[r.Header.Get("webhook-id")]++
	}
	byEvent := map[string]int{}
	twice := 0
	for _, d := range rows {
		byEvent[d.EventID]++
		if n := received[d.ID]; n != 1 {
			twice++
			t.Errorf("delivery %s of event %s was received %d times, want once", d.ID, d.EventID, n)
		}
	}
	for i := range events {
		if id := fmt.Sprintf(idFormat, i); byEvent[id] != 1 {
			t.Errorf("event %s has %d deliveries, want 1", id, byEvent[id])
		}
	}
	if len(got) != events {
		t.Errorf("the receiver got %d requests for %d events (%d deliveries not received exactly once)", len(got), events, twice)
	}
}
