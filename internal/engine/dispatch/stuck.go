package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
)

// ErrSecretUnavailable marks an attempt that was not made because this
// worker cannot open the webhook's signing secret or a sealed header:
// secrets.key is missing, or is not the key they were sealed with. It is the
// worker's configuration, not the receiver: the delivery stays Failed with
// its attempts unchanged, and the cause is written to its last_error.
var ErrSecretUnavailable = errors.New("webhook secret cannot be opened")

// ErrRequestUnbuildable marks an attempt that was not made because the
// webhook, as it is now, cannot make this delivery's request: its
// url_template fails with the document the delivery keeps. It is the
// webhook's definition, not the receiver: the delivery stays Failed with its
// attempts unchanged, the cause is written to its last_error, and the
// attempt is made once the template is fixed.
var ErrRequestUnbuildable = errors.New("webhook request cannot be built")

// NotSentPrefix starts the last_error of a delivery that could not be sent
// for a reason on Homing's side (ErrSecretUnavailable,
// ErrRequestUnbuildable), so that homing stats can find and show such
// deliveries.
const NotSentPrefix = "not sent: "

// notSent gives back a claim whose request could not be made for a reason
// on Homing's side, why (ErrSecretUnavailable or ErrRequestUnbuildable)
// because of err: the row is as it was before the claim, its last_error
// says why and what to do, and the error returned fails the task, to be run
// again.
func (d *Dispatcher) notSent(ctx context.Context, c claimed, why, err error) error {
	hint := "fix the webhook's url_template with homing webhook update --url-template; the delivery is sent once it renders"
	switch {
	case why == ErrSecretUnavailable:
		hint = "set secrets.key on every worker to the key the webhook's secret was sealed with, or give the webhook a new secret with homing webhook update --secret"
	case errors.Is(err, budget.ErrOverloaded):
		hint = "this worker was past its memory ceiling (process.memory_limit), not the webhook's fault; the attempt is made again later"
		d.log.Error("attempt not made: this process is past its memory ceiling (process.memory_limit); it is made again later", "delivery", c.row.ID, "error", err.Error())
	case errors.Is(err, budget.ErrTimeLimit):
		hint = "the url_template reached its time limit: this worker was too busy, or the template is too slow; the attempt is made again later"
		d.log.Warn("attempt not made: the webhook's url_template reached its time limit (this worker too busy, or the template too slow); it is made again later",
			"delivery", c.row.ID, "webhook", c.row.WebhookName, "error", err.Error())
	}
	cause := fmt.Sprintf("%s%v (%s)", NotSentPrefix, err, hint)
	err = fmt.Errorf("delivery %s: %w: %w", c.row.ID, why, err)
	if rerr := d.release(ctx, c.row, c.prevNext); rerr != nil {
		return errors.Join(err, rerr)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	if uerr := d.store.NotSent(ctx, c.row.ID, cause); uerr != nil {
		err = errors.Join(err, uerr)
	}
	return err
}
