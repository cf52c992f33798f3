package send

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// received is what a test receiver saw of one request.
type received struct {
	method string
	path   string
	header http.Header
	body   []byte
}

// recorder is an httptest receiver that keeps every request it gets and
// answers with respond.
type recorder struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []received
	newConns atomic.Int64
}

func newRecorder(t *testing.T, respond http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: read body: %v", err)
		}
		rec.mu.Lock()
		rec.requests = append(rec.requests, received{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: body})
		rec.mu.Unlock()
		respond(w, r)
	}))
	rec.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			rec.newConns.Add(1)
		}
	}
	rec.srv.Start()
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

func newTestSender(t *testing.T) *Sender {
	t.Helper()
	s := NewSender(SenderConfig{UserAgent: "Homing/test"})
	t.Cleanup(s.Close)
	return s
}

func TestSendStatuses(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		status    int
		wantClass Class
		wantErr   string
	}{
		{name: "OK", status: http.StatusOK, wantClass: Class2xx},
		{name: "Accepted", status: http.StatusAccepted, wantClass: Class2xx},
		{name: "NotModified", status: http.StatusNotModified, wantClass: Class3xx, wantErr: "receiver answered 304 Not Modified"},
		{name: "BadRequest", status: http.StatusBadRequest, wantClass: Class4xx, wantErr: "receiver answered 400 Bad Request"},
		{name: "TooMany", status: http.StatusTooManyRequests, wantClass: Class4xx, wantErr: "receiver answered 429 Too Many Requests"},
		{name: "ServerError", status: http.StatusInternalServerError, wantClass: Class5xx, wantErr: "receiver answered 500 Internal Server Error"},
		{name: "Unavailable", status: http.StatusServiceUnavailable, wantClass: Class5xx, wantErr: "receiver answered 503 Service Unavailable"},
		{name: "Nonstandard", status: 599, wantClass: Class5xx, wantErr: "receiver answered 599"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "120")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, "answer "+tt.name)
			})
			res := newTestSender(t).Send(context.Background(), Request{Method: http.MethodPost, URL: rec.srv.URL + "/hook", Body: []byte(`{}`)})

			if res.Class != tt.wantClass || res.StatusCode != tt.status {
				t.Errorf("class, status = %q, %d; want %q, %d", res.Class, res.StatusCode, tt.wantClass, tt.status)
			}
			if res.OK() != (tt.wantClass == Class2xx) {
				t.Errorf("OK() = %v", res.OK())
			}
			if tt.wantErr == "" && res.Err != nil {
				t.Errorf("Err = %v, want nil", res.Err)
			}
			if tt.wantErr != "" && (res.Err == nil || res.Err.Error() != tt.wantErr) {
				t.Errorf("Err = %v, want %q", res.Err, tt.wantErr)
			}
			if tt.status != http.StatusNotModified && string(res.Body) != "answer "+tt.name {
				t.Errorf("Body = %q", res.Body)
			}
			if res.Header.Get("Retry-After") != "120" {
				t.Errorf("response header Retry-After = %q", res.Header.Get("Retry-After"))
			}
			if n := len(rec.got()); n != 1 {
				t.Errorf("receiver got %d requests, want 1", n)
			}
		})
	}
}

func TestSendDeliversRequestExactly(t *testing.T) {
	t.Parallel()

	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	body := []byte("{\"name\": \"SO-1\", \"note\": \"<b>caf\u00e9</b>\\u0000\"}\n")
	header := http.Header{
		"Content-Type":      {"application/json"},
		"X-Frappe-Webhook":  {"sig=abc+/="},
		"X-Multi":           {"a", "b"},
		"Authorization":     {"Bearer t0ken"},
		"X-Idempotency-Key": {"evt-1"},
	}
	callerHeader := header.Clone()
	res := newTestSender(t).Send(context.Background(), Request{Method: http.MethodPut, URL: rec.srv.URL + "/a/b?x=1&y=%20", Header: header, Body: body})
	if !res.OK() {
		t.Fatalf("Send: %v", res.Err)
	}

	got := rec.got()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	if r.method != http.MethodPut || r.path != "/a/b?x=1&y=%20" {
		t.Errorf("request line = %s %s", r.method, r.path)
	}
	if !bytes.Equal(r.body, body) {
		t.Errorf("body = %q, want %q", r.body, body)
	}
	for name, values := range header {
		if strings.Join(r.header.Values(name), "|") != strings.Join(values, "|") {
			t.Errorf("header %s = %q, want %q", name, r.header.Values(name), values)
		}
	}
	if ua := r.header.Get("User-Agent"); ua != "Homing/test" {
		t.Errorf("User-Agent = %q, want Homing/test", ua)
	}
	if cl := r.header.Get("Content-Length"); cl != fmt.Sprint(len(body)) {
		t.Errorf("Content-Length = %q, want %d", cl, len(body))
	}
	if len(header) != len(callerHeader) || header.Get("User-Agent") != "" {
		t.Errorf("Send changed the caller's header: %v", header)
	}
}

func TestSendUserAgent(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		cfgUA  string
		header http.Header
		want   string
	}{
		{name: "Configured", cfgUA: "Homing/0.1.0", want: "Homing/0.1.0"},
		{name: "Default", want: DefaultUserAgent},
		{name: "CallerWins", cfgUA: "Homing/0.1.0", header: http.Header{"User-Agent": {"Frappe"}}, want: "Frappe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
			s := NewSender(SenderConfig{UserAgent: tt.cfgUA})
			t.Cleanup(s.Close)
			if res := s.Send(context.Background(), Request{URL: rec.srv.URL, Header: tt.header}); !res.OK() {
				t.Fatalf("Send: %v", res.Err)
			}
			got := rec.got()
			if len(got) != 1 || got[0].header.Get("User-Agent") != tt.want {
				t.Fatalf("receiver got %+v, want one request with User-Agent %q", got, tt.want)
			}
			if got[0].method != http.MethodPost {
				t.Errorf("method = %s, want the POST default", got[0].method)
			}
		})
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()

	target := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	redirector := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL+"/elsewhere", http.StatusFound)
	})

	res := newTestSender(t).Send(context.Background(), Request{URL: redirector.srv.URL, Body: []byte("x")})
	if res.Class != Class3xx || res.StatusCode != http.StatusFound {
		t.Errorf("class, status = %q, %d; want 3xx, 302", res.Class, res.StatusCode)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "302") {
		t.Errorf("Err = %v, want it to mention 302", res.Err)
	}
	if loc := res.Header.Get("Location"); loc != target.srv.URL+"/elsewhere" {
		t.Errorf("Location = %q", loc)
	}
	if n := len(target.got()); n != 0 {
		t.Errorf("redirect target got %d requests, want 0", n)
	}
	if n := len(redirector.got()); n != 1 {
		t.Errorf("redirector got %d requests, want 1", n)
	}
}

func TestSendConnectionRefused(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}

	res := newTestSender(t).Send(context.Background(), Request{URL: "http://" + addr + "/hook"})
	if res.Class != ClassConnection {
		t.Errorf("class = %q, want connection (err %v)", res.Class, res.Err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "connect: connection refused") {
		t.Errorf("Err = %v, want the dial error", res.Err)
	}
	if res.StatusCode != 0 || res.Header != nil || res.OK() {
		t.Errorf("result without a response has status %d, header %v", res.StatusCode, res.Header)
	}
}

func TestSendTimeout(t *testing.T) {
	t.Parallel()

	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close

	const timeout = 200 * time.Millisecond
	res := newTestSender(t).Send(context.Background(), Request{URL: rec.srv.URL, Timeout: timeout})
	if res.Class != ClassTimeout {
		t.Errorf("class = %q, want timeout (err %v)", res.Class, res.Err)
	}
	if res.Err == nil || res.Err.Error() != "request timed out after 200ms: context deadline exceeded" {
		t.Errorf("Err = %v", res.Err)
	}
	if !errors.Is(res.Err, context.DeadlineExceeded) || errors.Is(res.Err, context.Canceled) {
		t.Errorf("Err %v should be a deadline, not a cancellation", res.Err)
	}
	// Guaranteed on any machine, however loaded: the deadline and Duration
	// start from one instant of the monotonic clock, and Duration is read
	// once the deadline has passed.
	if res.Duration < timeout {
		t.Errorf("Duration = %s, shorter than the timeout", res.Duration)
	}
	if n := len(rec.got()); n != 1 {
		t.Errorf("receiver got %d requests, want 1", n)
	}
}

func TestSendCallerCancel(t *testing.T) {
	t.Parallel()

	arrived := make(chan struct{})
	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() { done <- newTestSender(t).Send(ctx, Request{URL: rec.srv.URL, Timeout: time.Minute}) }()
	<-arrived
	cancel()
	res := <-done

	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", res.Err)
	}
	if res.Class != ClassCanceled {
		t.Errorf("class = %q, want canceled", res.Class)
	}
}

func TestSendTruncatesResponse(t *testing.T) {
	t.Parallel()

	big := bytes.Repeat([]byte("0123456789abcdef"), (MaxResponseBytes+4096)/16)
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) })

	res := newTestSender(t).Send(context.Background(), Request{URL: rec.srv.URL})
	if !res.OK() {
		t.Fatalf("Send: %v", res.Err)
	}
	if len(res.Body) != MaxResponseBytes || !bytes.Equal(res.Body, big[:MaxResponseBytes]) {
		t.Errorf("Body has %d bytes, want the first %d of the response", len(res.Body), MaxResponseBytes)
	}
}

func TestSendReusesConnections(t *testing.T) {
	t.Parallel()

	// The answer is longer than what Send keeps, so reuse also proves the
	// rest is drained.
	answer := bytes.Repeat([]byte("x"), MaxResponseBytes+1000)
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(answer) })
	s := newTestSender(t)

	const sends = 5
	for i := range sends {
		if res := s.Send(context.Background(), Request{URL: rec.srv.URL, Body: []byte("{}")}); !res.OK() {
			t.Fatalf("send %d: %v", i, res.Err)
		}
	}
	if n := len(rec.got()); n != sends {
		t.Errorf("receiver got %d requests, want %d", n, sends)
	}
	if n := rec.newConns.Load(); n != 1 {
		t.Errorf("receiver saw %d new connections for %d sequential sends, want 1", n, sends)
	}
}

// TestSendDurationIsTheAttempt holds Duration to what is guaranteed on
// any machine: it is measured on the monotonic clock, inside the Send call
// that made the request.
func TestSendDurationIsTheAttempt(t *testing.T) {
	t.Parallel()

	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	before := time.Now()
	res := newTestSender(t).Send(context.Background(), Request{URL: rec.srv.URL})
	outside := time.Since(before)
	if !res.OK() {
		t.Fatalf("Send: %v", res.Err)
	}
	if res.Duration <= 0 || res.Duration > outside {
		t.Errorf("Duration = %s, want within (0, %s], the Send call that made it", res.Duration, outside)
	}
}

func TestSendInvalidRequest(t *testing.T) {
	t.Parallel()

	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	tests := []struct {
		name    string
		req     Request
		wantErr string
	}{
		{name: "Empty", req: Request{}, wantErr: `request URL "" is not http(s)`},
		{name: "FTP", req: Request{URL: "ftp://example.com/x"}, wantErr: `request URL "ftp://example.com/x" is not http(s)`},
		{name: "Relative", req: Request{URL: "/hook"}, wantErr: `is not http(s)`},
		{name: "NoHost", req: Request{URL: "http:///hook"}, wantErr: `request URL "http:///hook" has no host`},
		{name: "Unparsable", req: Request{URL: "http://[::1"}, wantErr: `request URL "http://[::1" cannot be parsed`},
		{name: "ControlChar", req: Request{URL: "http://example.com/\x7f"}, wantErr: `cannot be parsed`},
		{name: "BadMethod", req: Request{Method: "PO ST", URL: rec.srv.URL}, wantErr: `invalid method "PO ST"`},
	}
	s := newTestSender(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := s.Send(context.Background(), tt.req)
			if res.Class != ClassInvalid {
				t.Errorf("class = %q, want invalid", res.Class)
			}
			if !errors.Is(res.Err, ErrUnbuildable) {
				t.Errorf("Err %v does not wrap ErrUnbuildable", res.Err)
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) {
				t.Errorf("Err = %v, want it to contain %q", res.Err, tt.wantErr)
			}
		})
	}
	if n := len(rec.got()); n != 0 {
		t.Errorf("receiver got %d requests from invalid ones", n)
	}
}

func TestSendDialControl(t *testing.T) {
	t.Parallel()

	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	errRefused := errors.New("address is not allowed")
	s := NewSender(SenderConfig{DialControl: func(network, address string, _ syscall.RawConn) error {
		return errRefused
	}})
	t.Cleanup(s.Close)

	res := s.Send(context.Background(), Request{URL: rec.srv.URL})
	if res.Class != ClassConnection || !errors.Is(res.Err, errRefused) {
		t.Errorf("class, err = %q, %v; want connection wrapping the guard's error", res.Class, res.Err)
	}
	if n := len(rec.got()); n != 0 {
		t.Errorf("receiver got %d requests past the guard", n)
	}
}
