package tasks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// The hourly retention task rolls up the console's closed hours first: in a
// worker (newHarness runs worker.New) the task leaves the day's hours in the
// rollup; a rollup that fails fails the task, saying what.
func TestRetentionTaskRollsUpTheConsolesHours(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	c := asynq.NewClient(h.redis)
	defer c.Close()
	if _, err := c.Enqueue(tasks.NewRetentionTask()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the day's closed hours rolled up", func() bool {
		var n int64
		if err := h.db.Model(&models.RolledHour{}).Where("hour > ?", h.clock.Now().Add(-25*time.Hour)).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n >= 22 // the 24 hours less the current one and, within its settle, the last
	})

	failing := &tasks.Handlers{RollUp: func(context.Context) (int, error) { return 0, errors.New("database away") }}
	if err := failing.HandleRetention(context.Background(), tasks.NewRetentionTask()); err == nil || err.Error() != "roll up the console's hours (a console read rolls up what it misses): database away" {
		t.Fatalf("HandleRetention with a failing rollup: %v", err)
	}
}
