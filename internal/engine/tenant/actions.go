package tenant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrActionRate is an action (a resend, a retry, a recover, a test send)
// refused because its tenant's action_rate is spent; errors.As finds an
// *ActionRateError with the wait.
var ErrActionRate = errors.New("the tenant's action_rate is spent")

// ActionRateError is a refused action: whose, its rate, and how long until
// one is free.
type ActionRateError struct {
	Tenant     string
	Rate       int
	RetryAfter time.Duration
}

func (e *ActionRateError) Error() string {
	return fmt.Sprintf("tenant %q resends, retries, recovers and test-sends at most %d times a second (its action_rate): try again in %s, or raise it with homing tenant update %s --action-rate N",
		e.Tenant, e.Rate, e.RetryAfter.Round(time.Millisecond), e.Tenant)
}

// Unwrap makes errors.Is(err, ErrActionRate) hold.
func (e *ActionRateError) Unwrap() error { return ErrActionRate }

// Limiter takes one from a budget of perSecond a second shared by every
// process, answering how long until one is free when none is;
// *ratelimit.Limiter is one.
type Limiter interface {
	Allow(ctx context.Context, key string, perSecond int) (time.Duration, error)
}

// Actions charges the actions a tenant asks of serve (a resend, a retry, a
// recover, a test send: each sends, or makes due, requests to its
// receivers) to the tenant's action_rate, as publish_rate charges its
// events. The services that perform them (recovery.Service,
// webhook.Service) take it, so the API, the console and the portal are
// charged alike; the command line, an operator's, builds them without it.
type Actions struct {
	tenants *Service
	limiter Limiter
	log     *slog.Logger
}

// NewActions charges actions to the tenants' action_rate read through
// tenants, in limiter's budgets.
func NewActions(tenants *Service, limiter Limiter, log *slog.Logger) *Actions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Actions{tenants: tenants, limiter: limiter, log: log}
}

// Take takes one action from tenant's action_rate, or returns an
// *ActionRateError. A nil Actions takes nothing. When Redis cannot answer,
// the action is allowed: a limit is not worth refusing an operator's
// recovery for.
func (a *Actions) Take(ctx context.Context, tenant string) error {
	if a == nil {
		return nil
	}
	m, err := a.tenants.Lookup(ctx, tenant)
	if err != nil {
		return err
	}
	if m.ActionRate <= 0 {
		return nil
	}
	wait, err := a.limiter.Allow(ctx, "action:"+m.Name, m.ActionRate)
	if err != nil {
		a.log.Warn("action_rate not checked: the rate limiter did not answer; action allowed", "tenant", m.Name, "error", err.Error())
		return nil
	}
	if wait > 0 {
		return &ActionRateError{Tenant: m.Name, Rate: m.ActionRate, RetryAfter: wait}
	}
	return nil
}
