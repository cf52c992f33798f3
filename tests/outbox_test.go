package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// TestOutboxWithTheSchedulerKilled commits events with client.PublishTx
// from this process while the scheduler, whose relay moves them into Redis,
// is SIGKILLed three times and restarted. Every committed event reaches each
// of two webhooks exactly once; rolled-back events reach nobody; the outbox
// ends empty.
func TestOutboxWithTheSchedulerKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	s := newSystem(t)
	rc := testreceiver.Answers(t, func(int) int { return http.StatusOK })
	for _, name := range []string{"erp", "crm"} {
		// receiverTimeout: this test counts every receipt exactly once.
		s.ok(t, nil, "homing", "webhook", "create", "--name", name, "--doctype", "Order", "--event", "on_submit",
			"--url", rc.URL+"/"+name, "--timeout", receiverTimeout)
	}
	s.start("worker", "worker started")
	scheduler := s.spawn(t, "scheduler", "scheduler started")
	db := s.openDB(t)

	const batches, perBatch = 100, 10
	var (
		producer  sync.WaitGroup
		mu        sync.Mutex
		committed []string
		discarded []string
	)
	producer.Go(func() {
		rolledBack := errors.New("business write failed")
		for b := range batches {
			// At most five batches ahead of the receiver, so events keep
			// being committed across the kills.
			mu.Lock()
			ahead := 2 * (len(committed) - 5*perBatch)
			mu.Unlock()
			deadline := time.Now().Add(2 * time.Minute)
			for len(rc.Requests()) < ahead {
				if time.Now().After(deadline) {
					t.Errorf("batch %d: the receiver is stuck at %d requests", b, len(rc.Requests()))
					return
				}
				time.Sleep(pollInterval) // pacing by the receiver, with a deadline
			}
			var ids []string
			for i := range perBatch {
				ids = append(ids, fmt.Sprintf("order-%03d-%d", b, i))
			}
			abort := b%10 == 3
			err := db.Transaction(func(tx *gorm.DB) error {
				for _, id := range ids {
					ev := client.Event{ID: id, DocType: "Order", DocName: id, Event: "on_submit", Doc: map[string]any{"name": id}}
					if _, err := client.PublishTx(context.Background(), tx, ev); err != nil {
						return err
					}
				}
				if abort {
					return rolledBack
				}
				return nil
			})
			mu.Lock()
			switch {
			case abort && errors.Is(err, rolledBack):
				discarded = append(discarded, ids...)
			case err == nil:
				committed = append(committed, ids...)
			default:
				t.Errorf("commit batch %d: %v", b, err)
			}
			mu.Unlock()
		}
	})

	for kill, at := range []int{100 + rand.IntN(200), 600 + rand.IntN(300), 1100 + rand.IntN(300)} {
		within(t, 2*time.Minute, fmt.Sprintf("kill %d at %d receipts", kill+1, at), func() (bool, string) {
			got := len(rc.Requests())
			return got >= at, fmt.Sprintf("%d receipts", got)
		})
		scheduler.kill(t)
		scheduler = s.spawn(t, "scheduler", "scheduler started")
	}
	producer.Wait()
	if t.Failed() {
		return
	}
	want := 2 * len(committed)
	eventually(t, "every committed event received by both webhooks", func() (bool, string) {
		counts := map[string]int{}
		for _, name := range []string{"erp", "crm"} {
			c, err := statusCounts(db, name)
			if err != nil {
				return false, err.Error()
			}
			counts[name] = c[models.StatusDelivered]
		}
		got := len(okByID(rc.Requests()))
		return got == want && counts["erp"] == len(committed) && counts["crm"] == len(committed),
			fmt.Sprintf("%d of %d deliveries received; Delivered %v%s%s", got, want, counts, stuck(db, "erp"), stuck(db, "crm"))
	})
	scheduler.terminate(t)
	s.stop()

	for id, n := range okByID(rc.Requests()) {
		if n != 1 {
			t.Errorf("delivery %s was received %d times, want once", id, n)
		}
	}
	if n := len(rc.Requests()); n != want {
		t.Errorf("the receiver got %d requests, want %d (2 webhooks × %d committed events)", n, want, len(committed))
	}
	var stray int64
	if err := db.Model(&models.Delivery{}).Where("event_id IN ?", discarded).Count(&stray).Error; err != nil {
		t.Fatal(err)
	}
	if stray != 0 || len(discarded) == 0 {
		t.Errorf("%d deliveries of the %d rolled-back events, want none", stray, len(discarded))
	}
	var left int64
	if err := db.Model(&models.OutboxEvent{}).Count(&left).Error; err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d rows left in the outbox", left)
	}
}
