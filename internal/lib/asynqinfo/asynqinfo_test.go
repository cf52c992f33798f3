package asynqinfo_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/lib/asynqinfo"
	"github.com/homingdev/homing/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// asynq's GetQueueInfo answers a queue it has never seen (or lost with a
// FLUSHDB) with an error no exported error matches; QueueMissing knows it,
// and QueueInfo answers it as an empty queue. A queue that exists is read.
func TestGetQueueInfoOfAMissingQueue(t *testing.T) {
	opt, _ := testenv.Redis(t)
	in := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = in.Close() })

	_, err := in.GetQueueInfo("never-seen")
	if err == nil || !asynqinfo.QueueMissing(err) {
		t.Fatalf("GetQueueInfo of a missing queue: %v; QueueMissing says %v, want true", err, asynqinfo.QueueMissing(err))
	}
	if errors.Is(err, asynq.ErrQueueNotFound) {
		t.Log("asynq now wraps ErrQueueNotFound here: the text match in QueueMissing can go")
	}
	if info, err := asynqinfo.QueueInfo(in, "never-seen"); info != nil || err != nil {
		t.Fatalf("QueueInfo of a missing queue = %v, %v; want nil, nil", info, err)
	}

	client := asynq.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("seen")); err != nil {
		t.Fatal(err)
	}
	info, err := asynqinfo.QueueInfo(in, "seen")
	if err != nil || info == nil || info.Pending != 1 {
		t.Fatalf("QueueInfo of a queue with one task = %+v, %v", info, err)
	}

	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("list: %w", asynq.ErrQueueNotFound), true},
		{errors.New("INTERNAL_ERROR: redis: connection refused"), false},
		{errors.New("NOT_FOUND: task does not exist"), false},
	} {
		if got := asynqinfo.QueueMissing(c.err); got != c.want {
			t.Errorf("QueueMissing(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
