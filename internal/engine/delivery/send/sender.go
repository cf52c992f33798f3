package send

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

const (
	// MaxResponseBytes is how much of a receiver's answer is kept for the
	// attempt record; receivers sometimes answer with whole HTML pages.
	MaxResponseBytes = 64 << 10

	// drainBytes is how much more of a response is read and thrown away so
	// the connection can go back to the pool; beyond that it is closed.
	drainBytes = 1 << 20

	// DefaultTimeout applies when a Request has no Timeout.
	DefaultTimeout = 5 * time.Second

	// DefaultUserAgent is sent when SenderConfig has no UserAgent and the
	// request has none either.
	DefaultUserAgent = "Homing"

	connectTimeout = 5 * time.Second
)

// SenderConfig holds what a Sender needs from its owner.
type SenderConfig struct {
	// UserAgent is added to requests that do not set one, e.g.
	// "Homing/0.1.0".
	UserAgent string
	// DialControl, when set, runs on every new connection after the
	// address is resolved and before connecting, which is where an SSRF
	// guard can refuse private addresses.
	DialControl func(network, address string, c syscall.RawConn) error
	// WrapTransport, when set, wraps the pooled transport once, at
	// construction: tracing's HTTP client span (otlp.Transport). Nil adds
	// nothing to a request.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Sender sends webhook requests over one shared connection pool, so that
// a busy receiver sees a few kept-alive connections rather than a new one
// per delivery. It is safe for concurrent use.
type Sender struct {
	client    *http.Client
	transport *http.Transport
	userAgent string
}

// NewSender builds a Sender. Its transport ignores proxy environment
// variables on purpose: a proxy would make DialControl see the proxy's
// address instead of the receiver's.
func NewSender(cfg SenderConfig) *Sender {
	dialer := &net.Dialer{
		Timeout:   connectTimeout,
		KeepAlive: 30 * time.Second,
		Control:   cfg.DialControl,
	}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	userAgent := cfg.UserAgent
	if userAgent == "" {
		userAgent = DefaultUserAgent
	}
	var rt http.RoundTripper = transport
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	return &Sender{
		client: &http.Client{
			Transport: rt,
			// By default a redirect is the receiver's misconfiguration, and
			// following it would re-send a signed body to a URL nobody
			// registered; Request.FollowRedirects opts in per webhook.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		transport: transport,
		userAgent: userAgent,
	}
}

// Close drops the pooled idle connections. Requests in flight finish.
func (s *Sender) Close() {
	s.transport.CloseIdleConnections()
}

// Request is one HTTP request to a receiver, fully built by the caller.
type Request struct {
	// Method defaults to POST when empty.
	Method string
	URL    string
	// Header is sent as is, including Content-Type and signatures; the
	// Sender adds only a User-Agent when there is none.
	Header http.Header
	Body   []byte
	// Timeout bounds the whole request, reading the capped response body
	// included; zero means DefaultTimeout.
	Timeout time.Duration
	// FollowRedirects is how many redirects to follow (Frappe's requests
	// follows up to 30; imported webhooks get 10). 0 makes a 3xx answer
	// the result. Every hop dials through DialControl, so the SSRF guard
	// sees each redirect's address; 301, 302 and 303 turn a POST into a
	// GET without a body (as requests does), 307 and 308 repeat it.
	// A hop never carries a Referer, and once a hop leaves the URL's origin
	// it and every later hop go without the Secret headers and anything
	// credential-like (see Credential).
	FollowRedirects int
	// Secret names the headers only the URL's origin may see: the
	// webhook's sealed headers and its signature headers.
	Secret []string
}

// ErrTooManyRedirects marks an attempt stopped after its webhook's
// follow_redirects limit.
var ErrTooManyRedirects = errors.New("too many redirects")

// clientFor is the shared client, or one over the same pool that follows
// up to req.FollowRedirects redirects, stripping each hop as
// stripRedirect says.
func (s *Sender) clientFor(r Request) *http.Client {
	n := r.FollowRedirects
	if n <= 0 {
		return s.client
	}
	return &http.Client{
		Transport: s.client.Transport, // the pool, wrapped as the shared client is
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > n {
				return fmt.Errorf("%w: stopped after following %d (the webhook's follow_redirects), next was %s", ErrTooManyRedirects, n, req.URL.Redacted())
			}
			stripRedirect(req, via, r.Secret)
			return nil
		},
	}
}

// stripRedirect removes from a redirect hop what its target must not see.
// The Referer Go's client adds would hand it the webhook's URL, tokens in
// its query included, so no hop has one. Go itself drops only
// Authorization, Cookie and a few others when the host changes, and puts
// them back when a later hop returns; here a hop that leaves the first
// request's origin (scheme, host and port) loses the secret headers and
// every credential-like one for the rest of the chain, since a host the
// webhook never named chose where the chain goes from then on.
func stripRedirect(req *http.Request, via []*http.Request, secret []string) {
	req.Header.Del("Referer")
	left := !sameOrigin(req.URL, via[0].URL)
	for _, v := range via[1:] {
		left = left || !sameOrigin(v.URL, via[0].URL)
	}
	if !left {
		return
	}
	for _, name := range secret {
		req.Header.Del(name)
	}
	for name := range req.Header {
		if Credential(name) {
			delete(req.Header, name)
		}
	}
}

// sameOrigin compares scheme, host and port, the default port spelled out.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// credentialWords are the parts of a header name that make it
// credential-like: Authorization, X-Auth-Token, X-Api-Key, X-Client-Secret,
// webhook-signature, Cookie, Proxy-Authorization, X-Session-Id …
var credentialWords = []string{"auth", "token", "secret", "key", "signature", "cookie", "session", "password", "credential"}

// Credential reports whether a header named name looks like it carries a
// credential, which is what a redirect to another origin drops even when
// the webhook did not mark it secret.
func Credential(name string) bool {
	n := strings.ToLower(name)
	if SecretByDefault(n) {
		return true
	}
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Class sorts an outcome for metrics and the attempt record.
type Class string

// The outcome classes. ClassInvalid means the request could not even be
// constructed (a bad URL); ClassCanceled means the caller's context ended
// first, which says nothing about the receiver.
const (
	Class2xx        Class = "2xx"
	Class3xx        Class = "3xx"
	Class4xx        Class = "4xx"
	Class5xx        Class = "5xx"
	ClassTimeout    Class = "timeout"
	ClassConnection Class = "connection"
	ClassInvalid    Class = "invalid"
	ClassCanceled   Class = "canceled"
)

// Result is what one attempt produced.
type Result struct {
	// StatusCode is 0 when no response arrived.
	StatusCode int
	// Header holds the response headers (for Retry-After), nil when no
	// response arrived.
	Header http.Header
	// Body holds at most MaxResponseBytes of the response body.
	Body []byte
	// Duration runs from the instant the request's deadline is set from to
	// the end of the attempt, on the monotonic clock: a ClassTimeout result
	// has a Duration of at least its timeout.
	Duration time.Duration
	Class    Class
	// Err is nil only for a 2xx answer and says what went wrong otherwise.
	Err error
}

// OK reports whether the receiver accepted the delivery.
func (r Result) OK() bool { return r.Class == Class2xx }

// Send makes one attempt and puts everything, failures included, into the
// Result. A bad URL gives ClassInvalid with an Err wrapping
// ErrUnbuildable. When ctx ends before the receiver answers, Err wraps
// ctx's error (context.Canceled on shutdown) and the Class is
// ClassCanceled, so the caller can tell its own shutdown from a failing
// receiver. Once a status line has arrived, the status decides the class:
// a body that breaks off or stalls is kept as far as it was read.
func (s *Sender) Send(ctx context.Context, req Request) Result {
	httpReq, err := s.newRequest(req)
	if err != nil {
		return Result{Class: ClassInvalid, Err: err}
	}

	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The deadline and Duration are one measurement on the process's
	// monotonic clock, from one instant: a timed-out request's Duration is
	// at least its timeout, however loaded the machine. An injected clock
	// (a stub, or clock.Real, which carries no monotonic reading) would
	// measure something other than what the deadline enforced.
	start := time.Now()
	reqCtx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	httpReq = httpReq.WithContext(reqCtx)

	resp, err := s.clientFor(req).Do(httpReq)
	if errors.Is(err, ErrTooManyRedirects) && resp != nil {
		// The last 3xx answer is the result, saying why it was not followed.
		res := Result{StatusCode: resp.StatusCode, Header: resp.Header, Duration: time.Since(start), Class: Class3xx}
		res.Err = fmt.Errorf("receiver answered %d: %w", resp.StatusCode, errors.Unwrap(err))
		return res
	}
	if err != nil {
		var res Result
		res.Class, res.Err = classifyFailure(ctx, reqCtx, timeout, err)
		// Measured after the deadline was seen as passed, never before.
		res.Duration = time.Since(start)
		return res
	}
	defer resp.Body.Close()

	// A read error here only shortens the kept body; see Send's doc.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	res := Result{
		StatusCode: resp.StatusCode,
		Header:     resp.Header,
		Body:       body,
		Duration:   time.Since(start),
	}
	res.Class, res.Err = classifyStatus(resp.StatusCode)
	// Reading the rest lets the connection be reused; a receiver that
	// keeps talking past that gets its connection closed instead.
	_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	return res
}

// newRequest checks what can be checked before any network traffic.
func (s *Sender) newRequest(req Request) (*http.Request, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, Unbuildable("request URL %q cannot be parsed: %w", req.URL, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, Unbuildable("request URL %q is not http(s)", req.URL)
	}
	if u.Hostname() == "" {
		return nil, Unbuildable("request URL %q has no host", req.URL)
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	httpReq, err := http.NewRequest(method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, Unbuildable("request cannot be constructed: %w", err)
	}
	if len(req.Body) == 0 {
		httpReq.Body, httpReq.GetBody, httpReq.ContentLength = http.NoBody, nil, 0
	}
	httpReq.Header = req.Header.Clone()
	if httpReq.Header == nil {
		httpReq.Header = http.Header{}
	}
	if httpReq.Header.Get("User-Agent") == "" {
		httpReq.Header.Set("User-Agent", s.userAgent)
	}
	return httpReq, nil
}

// classifyStatus maps a status code to its class and, for anything but
// 2xx, an error naming it.
func classifyStatus(code int) (Class, error) {
	var class Class
	switch {
	case code >= 200 && code < 300:
		return Class2xx, nil
	case code >= 300 && code < 400:
		class = Class3xx
	case code >= 400 && code < 500:
		class = Class4xx
	default:
		// 5xx, and the 1xx or 6xx+ codes no receiver should send.
		class = Class5xx
	}
	status := fmt.Sprint(code)
	if text := http.StatusText(code); text != "" {
		status += " " + text
	}
	return class, fmt.Errorf("receiver answered %s", status)
}

// classifyFailure sorts an error from before any response: the caller's
// context ending, the per-request timeout, or the connection.
func classifyFailure(parent, reqCtx context.Context, timeout time.Duration, err error) (Class, error) {
	if parent.Err() != nil {
		return ClassCanceled, fmt.Errorf("send request: gave up before the receiver answered: %w", parent.Err())
	}
	inner := err
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		inner = urlErr.Err
	}
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return ClassTimeout, fmt.Errorf("request timed out after %s: %w", timeout, context.DeadlineExceeded)
	}
	if errors.Is(inner, ErrForbiddenTarget) {
		return ClassInvalid, fmt.Errorf("%w", inner)
	}
	var opErr *net.OpError
	if errors.As(inner, &opErr) && opErr.Op == "dial" {
		return ClassConnection, inner
	}
	var netErr net.Error
	if errors.As(inner, &netErr) && netErr.Timeout() {
		return ClassTimeout, inner
	}
	return ClassConnection, inner
}

// CarriesBody reports whether a request of method must carry a body: an
// empty one would deliver nothing and be recorded as a success.
func CarriesBody(method string) bool {
	switch method {
	case "POST", "PUT", "PATCH":
		return true
	}
	return false
}
