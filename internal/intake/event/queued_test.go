package event_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// queuedBed is a Redis of the test's own, with a client, an inspector and
// the QueuedTasks on it.
func queuedBed(t *testing.T) (asynq.RedisClientOpt, *asynq.Client, *asynq.Inspector, event.QueuedTasks) {
	t.Helper()
	opt, _ := testenv.Redis(t)
	client := asynq.NewClient(opt)
	insp := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = client.Close(); _ = insp.Close() })
	return opt, client, insp, event.QueuedTasks{Inspector: insp}
}

// Drop deletes a tenant's fan-out tasks in every state asynq can delete
// (pending, scheduled, archived), and only that tenant's: another tenant's
// events, the default tenant's, and a task of the same prefix's neighbour
// ("acme-2") stay queued.
func TestDropDeletesOnlyTheTenantsQueuedEvents(t *testing.T) {
	t.Parallel()
	_, client, insp, q := queuedBed(t)

	// Before anything was ever queued, there is nothing to drop.
	if dropped, running, err := q.Drop(context.Background(), "acme"); err != nil || dropped != 0 || running != 0 {
		t.Fatalf("Drop on an empty Redis: %d dropped, %d running, %v; want 0, 0, nil", dropped, running, err)
	}
	enqueue := func(tenant, id string, opts ...asynq.Option) {
		t.Helper()
		task, err := event.NewTaskJSON(event.Event{Tenant: tenant, ID: id, DocType: "Sales Order", Event: "on_submit"}, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(task, opts...); err != nil {
			t.Fatal(err)
		}
	}
	// More than a page of acme's, so that Drop reads past the first.
	for i := range 150 {
		enqueue("acme", fmt.Sprintf("ev-%03d", i))
	}
	enqueue("acme", "later", asynq.ProcessIn(time.Hour))
	enqueue("acme", "archived")
	if err := insp.ArchiveTask(event.Queue, event.TaskID("acme", "archived")); err != nil {
		t.Fatal(err)
	}
	enqueue("acme-2", "ev-1")
	enqueue("initech", "ev-1")
	enqueue("", "ev-1")

	dropped, running, err := q.Drop(context.Background(), "acme")
	if err != nil || dropped != 152 || running != 0 {
		t.Fatalf("Drop(acme): %d dropped, %d running, %v; want 152, 0, nil", dropped, running, err)
	}
	var left []string
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListScheduledTasks, insp.ListArchivedTasks} {
		tasks, err := list(event.Queue, asynq.PageSize(1000))
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tasks {
			left = append(left, ti.ID)
		}
	}
	slices.Sort(left)
	want := []string{event.TaskID("", "ev-1"), event.TaskID("acme-2", "ev-1"), event.TaskID("initech", "ev-1")}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("left queued after Drop(acme): %v, want %v", left, want)
	}
	// acme's event ID is free again: the same ID queues anew.
	enqueue("acme", "later")
	if _, err := insp.GetTaskInfo(event.Queue, event.TaskID("acme", "later")); errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatal("acme's event queued again after Drop is not in Redis")
	}
}

// A fan-out running when Drop looks cannot be deleted: Drop counts it, and
// once it has failed into the retry set, the next Drop deletes it there.
func TestDropCountsRunningFanOutsAndDropsTheirRetry(t *testing.T) {
	t.Parallel()
	opt, client, insp, q := queuedBed(t)

	started, release := make(chan struct{}), make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: 1, Queues: map[string]int{event.Queue: 1},
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Hour },
		LogLevel:       asynq.FatalLevel,
	})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		close(started)
		<-release
		return errors.New("the database went away")
	})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	task, err := event.NewTaskJSON(event.Event{Tenant: "acme", ID: "busy", DocType: "Sales Order", Event: "on_submit"}, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	<-started
	if dropped, running, err := q.Drop(context.Background(), "acme"); err != nil || dropped != 0 || running != 1 {
		t.Fatalf("Drop during the fan-out: %d dropped, %d running, %v; want 0, 1, nil", dropped, running, err)
	}
	close(release)
	testenv.Eventually(t, "the failed fan-out to wait in the retry set", func() bool {
		info, err := insp.GetTaskInfo(event.Queue, event.TaskID("acme", "busy"))
		return err == nil && info.State == asynq.TaskStateRetry
	})
	if dropped, running, err := q.Drop(context.Background(), "acme"); err != nil || dropped != 1 || running != 0 {
		t.Fatalf("Drop after the fan-out failed: %d dropped, %d running, %v; want 1, 0, nil", dropped, running, err)
	}
}
