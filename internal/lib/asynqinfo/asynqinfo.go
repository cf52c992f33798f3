// Package asynqinfo reads asynq's queue information the way Homing needs it:
// a queue asynq has never seen (or lost with Redis's data) holds nothing.
package asynqinfo

import (
	"errors"
	"strings"

	"github.com/hibiken/asynq"
)

// QueueMissing reports whether err, from an asynq.Inspector call, says the
// queue does not exist. Most of the Inspector's methods wrap
// asynq.ErrQueueNotFound, but GetQueueInfo (asynq v0.26.0) returns the
// internal NotFound error as it is ("NOT_FOUND: queue \"default\" does not
// exist"), which no exported error matches: TestGetQueueInfoOfAMissingQueue
// pins that text, so an asynq upgrade that changes it fails there.
func QueueMissing(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOT_FOUND") && strings.Contains(msg, "queue") && strings.Contains(msg, "does not exist")
}

// QueueInfo is in.GetQueueInfo(queue), with a queue asynq does not know
// answered as an empty one (nil info, nil error).
func QueueInfo(in *asynq.Inspector, queue string) (*asynq.QueueInfo, error) {
	info, err := in.GetQueueInfo(queue)
	if QueueMissing(err) {
		return nil, nil
	}
	return info, err
}
