package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/signing"
	tenantpkg "github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/models"
)

// MaxTestResponse is how much of a receiver's answer a test send shows.
const MaxTestResponse = 2 << 10

// TestRate is how many test sends a webhook takes a second: one, whatever
// its rate_limit, so that the console, the portal and the API cannot be
// used to flood a receiver.
const TestRate = 1

// ErrTestRate is a test send refused because the webhook's test budget
// (TestRate) is spent; errors.As finds a *RateError with the wait.
var ErrTestRate = errors.New("test sends are limited to one a second per webhook")

// RateError is a refused test send and how long until one is free.
type RateError struct{ RetryAfter time.Duration }

func (e *RateError) Error() string {
	return fmt.Sprintf("%v: try again in %s", ErrTestRate, e.RetryAfter.Round(time.Millisecond))
}

// Unwrap makes errors.Is(err, ErrTestRate) hold.
func (e *RateError) Unwrap() error { return ErrTestRate }

// ErrNoSender is a test send asked of a service built without a sender
// (SetSender).
var ErrNoSender = errors.New("this process sends no test requests: the webhook service has no sender")

// Limiter takes one request from a budget of perSecond a second shared by
// every process, answering how long until one is free when none is;
// *ratelimit.Limiter is one.
type Limiter interface {
	Allow(ctx context.Context, key string, perSecond int) (time.Duration, error)
}

// SetSender gives the service what TestSend needs: the process's sender
// (its SSRF guard at dial time, its pool, its User-Agent) and the Redis
// limiter that holds the test budget across serve processes. A nil limiter
// keeps the budget in this process. Call it before the service is in use.
func (s *Service) SetSender(sender *send.Sender, limiter Limiter) {
	s.sender, s.limiter = sender, limiter
}

// SetActions charges every test send to its tenant's action_rate
// (tenant.Actions): serve's services do, the command line's do not. Call
// it before the service is in use.
func (s *Service) SetActions(a *tenantpkg.Actions) { s.actions = a }

// TestResult is one test send: the request as sent (secrets masked), and
// the receiver's answer. It is no event and no delivery: nothing of it is
// stored.
type TestResult struct {
	Preview
	// Sent reports whether a request went out; false when the condition
	// does not hold, no request could be built or the SSRF guard refused
	// the address, with Error saying why.
	Sent bool `json:"sent"`
	// StatusCode is the receiver's status, 0 when none answered.
	StatusCode int `json:"status_code,omitempty"`
	// Class sorts the outcome as a delivery's attempts are: 2xx, 4xx,
	// timeout, connection, invalid (the SSRF guard's refusal among them).
	Class string `json:"class,omitempty"`
	// OK reports whether the receiver accepted the request (2xx).
	OK bool `json:"ok"`
	// Duration is how long the receiver took, as "153ms".
	Duration string `json:"duration,omitempty"`
	// Response is the first MaxTestResponse bytes of the answer.
	Response string `json:"response,omitempty"`
	// Truncated reports whether the answer was longer than Response.
	Truncated bool `json:"truncated,omitempty"`
}

// TestSend renders webhook name for doc as Preview does and, when the
// condition holds and a request can be built, sends it once, now, through
// the process's sender: the webhook's sealed headers opened, signed with its
// secrets (the current one and those in their rotation grace, as an attempt
// is) under a test message ID, with its timeout and redirect limit. It
// writes no event and no delivery row; the answer is only returned. A
// webhook takes TestRate test sends a second (RateError beyond). A disabled
// tenant's webhook sends none (tenant.ErrDisabled).
func (s *Service) TestSend(ctx context.Context, tenant, name string, doc map[string]any) (TestResult, error) {
	w, err := s.Get(ctx, tenant, name)
	if err != nil {
		return TestResult{}, err
	}
	// A disabled tenant sends nothing, a test neither.
	if err := tenantpkg.RequireEnabled(ctx, s.db, w.Tenant); err != nil {
		return TestResult{}, err
	}
	if s.sender == nil {
		return TestResult{}, ErrNoSender
	}
	b, err := s.render(w, doc)
	if err != nil {
		return TestResult{}, err
	}
	res := TestResult{Preview: b.Preview}
	switch {
	case !b.Matched && b.Error == "":
		res.Error = "not sent: the condition does not hold for this document"
		return res, nil
	case b.Error != "":
		res.Error = "not sent: " + b.Error
		return res, nil
	case len(b.body) == 0 && send.CarriesBody(w.RequestMethod):
		res.Error = fmt.Sprintf("not sent: the body is empty and a %s request must carry one", w.RequestMethod)
		return res, nil
	}
	if err := s.allowTest(ctx, w); err != nil {
		return TestResult{}, err
	}
	if err := s.actions.Take(ctx, w.Tenant); err != nil {
		return TestResult{}, err
	}
	req, err := s.testRequest(w, b)
	if err != nil {
		return TestResult{}, err
	}
	res.Headers = maskedRequest(req)
	if err := s.checkTarget(ctx, req.URL); err != nil {
		// Refused before any traffic; the sender's dial guard would refuse
		// it too, after resolving.
		res.Sent, res.Class, res.Error = false, string(send.ClassInvalid), "not sent: "+strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
		return res, nil
	}
	out := s.sender.Send(ctx, req)
	res.Sent = out.Class != send.ClassInvalid // the dial guard's refusal among what was not
	res.StatusCode, res.Class, res.OK = out.StatusCode, string(out.Class), out.OK()
	res.Duration = out.Duration.Round(time.Millisecond).String()
	if out.Err != nil {
		res.Error = out.Err.Error()
	}
	body := out.Body
	if len(body) > MaxTestResponse {
		body, res.Truncated = body[:MaxTestResponse], true
	}
	res.Response = strings.ToValidUTF8(string(body), "\uFFFD")
	s.log.Info("webhook test sent", "tenant", w.Tenant, "webhook", w.Name, "status", out.StatusCode, "class", string(out.Class))
	return res, nil
}

// testRequest is b as an attempt sends it (dispatch's request): the sealed
// headers opened, signatures from the webhook's live secrets, the names of
// both kept from redirects to another origin.
func (s *Service) testRequest(w models.Webhook, b rendered) (send.Request, error) {
	h := b.header.Clone()
	now := s.now()
	secrets, err := LiveSecrets(s.box, &w, now)
	if err != nil {
		return send.Request{}, err
	}
	secret, err := Sign(s.box, &w, h, secrets, "test_"+uuid.Must(uuid.NewV7()).String(), now, b.body)
	if err != nil {
		return send.Request{}, err
	}
	return send.Request{Method: w.RequestMethod, URL: b.URL, Header: h, Body: b.body,
		Timeout: w.Timeout(), FollowRedirects: w.FollowRedirects, Secret: secret}, nil
}

// maskedRequest is req's headers as a view shows them: the sealed ones
// (not the signatures, which are no secret) as send.Masked.
func maskedRequest(req send.Request) map[string]string {
	out := flatHeaders(req.Header)
	for _, k := range req.Secret {
		k = http.CanonicalHeaderKey(k)
		if _, ok := out[k]; ok && !signatureHeader(k) {
			out[k] = send.Masked
		}
	}
	return out
}

// allowTest takes one test send from w's budget: the Redis limiter's when
// there is one, else this process's.
func (s *Service) allowTest(ctx context.Context, w models.Webhook) error {
	var (
		wait time.Duration
		err  error
	)
	if s.limiter != nil {
		wait, err = s.limiter.Allow(ctx, "test:"+w.ID, TestRate)
		if err != nil {
			return fmt.Errorf("webhook %q: take a test send from its budget: %w", w.Name, err)
		}
	} else {
		wait = s.tests.allow(w.ID, s.clock.Now())
	}
	if wait > 0 {
		return &RateError{RetryAfter: wait}
	}
	return nil
}

// localBudget is TestRate kept in one process: the time of each webhook's
// last test send.
type localBudget struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// allow answers 0 and records now when id's last test send is a
// 1/TestRate ago or more, else how long until it is.
func (l *localBudget) allow(id string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	every := time.Second / TestRate
	if at, ok := l.last[id]; ok && now.Sub(at) < every {
		return every - now.Sub(at)
	}
	for k, at := range l.last {
		if now.Sub(at) >= every {
			delete(l.last, k) // spent entries go, so the map stays small
		}
	}
	l.last[id] = now
	return 0
}

// signatureHeader reports whether k is one of the headers signing.Sign sets.
func signatureHeader(k string) bool {
	for _, h := range []string{signing.HeaderID, signing.HeaderTimestamp, signing.HeaderSignature, signing.HeaderFrappe} {
		if http.CanonicalHeaderKey(h) == k {
			return true
		}
	}
	return false
}
