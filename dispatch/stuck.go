package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSecretUnavailable marks an attempt that was not made because this
// worker cannot open the webhook's signing secret: secrets.key is missing,
// or is not the key the secret was sealed with. It is the worker's
// configuration, not the receiver: the delivery stays Failed with its
// attempts unchanged, and the cause is written to its last_error.
var ErrSecretUnavailable = errors.New("webhook secret cannot be opened")

// NotSentPrefix starts the last_error of a delivery that could not be sent
// for a reason on Homing's side (ErrSecretUnavailable), so that homing stats
// can find and show such deliveries.
const NotSentPrefix = "not sent: "

// secretFailed records why delivery id could not be signed in its
// last_error (row left Failed, attempts and next_retry untouched) and
// returns the attempt's error, marked ErrSecretUnavailable.
func (d *Dispatcher) secretFailed(id string, err error) error {
	msg := fmt.Sprintf("%s%v (set secrets.key on every worker to the key the webhook's secret was sealed with, or give the webhook a new secret with homing webhook update --secret)", NotSentPrefix, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if uerr := d.store.NotSent(ctx, id, msg); uerr != nil {
		err = errors.Join(err, uerr)
	}
	return fmt.Errorf("delivery %s: %w: %w", id, ErrSecretUnavailable, err)
}
