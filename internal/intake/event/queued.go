package event

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"
)

// QueuedTasks finds and deletes the fan-out tasks a tenant's events left in
// Redis, for tenant delete --force. A task still queued when its tenant is
// deleted would fan its event out to a later tenant of the same name (the
// old tenant's document sent to the new one's webhooks), and its TaskID
// would make that tenant's own event of the same ID look like a duplicate,
// never sent.
type QueuedTasks struct {
	Inspector *asynq.Inspector
}

// queuedPage is how many tasks a list call reads at a time: their payloads
// are read with them, so a page is bounded, not the queue.
const queuedPage = 100

// Drop deletes tenant's fan-out tasks waiting on Queue (pending, scheduled,
// retrying or archived) and counts those running now (active), which asynq
// cannot delete: a running fan-out may still fail and wait to be retried,
// so a caller drops again once it has ended.
func (q QueuedTasks) Drop(ctx context.Context, tenant string) (dropped, running int, err error) {
	prefix := TaskID(tenant, "")
	ids, err := q.find(ctx, prefix, q.Inspector.ListPendingTasks, q.Inspector.ListScheduledTasks,
		q.Inspector.ListRetryTasks, q.Inspector.ListArchivedTasks)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		switch err := q.Inspector.DeleteTask(Queue, id); {
		case err == nil:
			dropped++
		case errors.Is(err, asynq.ErrTaskNotFound):
			// It ran, or was retried into another state, meanwhile:
			// the caller's next Drop finds it there.
		default:
			return dropped, 0, fmt.Errorf("delete queued event task %s: %w", id, err)
		}
	}
	active, err := q.find(ctx, prefix, q.Inspector.ListActiveTasks)
	return dropped, len(active), err
}

// find lists the IDs of the tasks on Queue with prefix in each of lists,
// a page at a time.
func (q QueuedTasks) find(ctx context.Context, prefix string, lists ...func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error)) ([]string, error) {
	var ids []string
	for _, list := range lists {
		for page := 1; ; page++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			tasks, err := list(Queue, asynq.Page(page), asynq.PageSize(queuedPage))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				return nil, nil // nothing was ever queued
			}
			if err != nil {
				return nil, fmt.Errorf("list queued event tasks: %w", err)
			}
			for _, t := range tasks {
				if strings.HasPrefix(t.ID, prefix) {
					ids = append(ids, t.ID)
				}
			}
			if len(tasks) < queuedPage {
				break
			}
		}
	}
	return ids, nil
}
