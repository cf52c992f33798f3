// Package testreceiver is the real HTTP endpoint Homing's tests deliver to:
// it records every request as it arrived and answers with the status the
// test chooses, so a test asserts on what a receiver actually got (bytes,
// headers, count), never on what the code says it sent.
package testreceiver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Request is one request as the receiver got it, with the status it was
// answered with.
type Request struct {
	At     time.Time
	Method string
	Path   string
	URI    string // the request URI as sent: path (still escaped) and query
	Header http.Header
	Body   []byte
	Status int
}

// Receiver is a loopback HTTP server (its URL is Receiver.URL), closed when
// the test ends.
type Receiver struct {
	*httptest.Server

	mu     sync.Mutex
	reqs   []Request
	answer func(n int) int
	header http.Header   // added to every response
	block  chan struct{} // when non-nil, requests wait for it to close
	delay  time.Duration // how long each request waits before its answer
}

// New starts a receiver that answers 200 to every request.
func New(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{answer: func(int) int { return http.StatusOK }}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.mu.Lock()
		if r.block != nil {
			select {
			case <-r.block:
			default:
				close(r.block)
			}
		}
		r.mu.Unlock()
		r.Close()
	})
	return r
}

// Answering starts a receiver that answers code to every request.
func Answering(t testing.TB, code int) *Receiver {
	t.Helper()
	r := New(t)
	r.SetStatus(code)
	return r
}

// Answers starts a receiver that answers the n-th request (1-based) with
// status(n).
func Answers(t testing.TB, status func(n int) int) *Receiver {
	t.Helper()
	r := New(t)
	r.Answer(status)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	n := len(r.reqs) + 1
	code, block, delay := r.answer(n), r.block, r.delay
	r.reqs = append(r.reqs, Request{At: time.Now(), Method: req.Method, Path: req.URL.Path, URI: req.URL.RequestURI(), Header: req.Header.Clone(), Body: body, Status: code})
	for k, v := range r.header {
		w.Header()[k] = v
	}
	r.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-req.Context().Done():
			return
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"receipt":%d}`, n)
}

// SetDelay makes every later request wait d before it is answered, as a
// receiver that takes that long to answer.
func (r *Receiver) SetDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

// SetStatus answers every later request with code.
func (r *Receiver) SetStatus(code int) {
	r.Answer(func(int) int { return code })
}

// Answer answers the n-th request (1-based) with status(n).
func (r *Receiver) Answer(status func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = status
}

// SetHeader adds a header to every later response.
func (r *Receiver) SetHeader(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set(key, value)
}

// Hold makes requests hang until the returned func is called (or the
// request's client gives up).
func (r *Receiver) Hold() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.block = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.block = nil
			r.mu.Unlock()
			close(ch)
		})
	}
}

// Requests is every request so far, in order of arrival.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Count is how many requests arrived.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// Bodies is the body of every request so far.
func (r *Receiver) Bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]byte, len(r.reqs))
	for i, q := range r.reqs {
		out[i] = q.Body
	}
	return out
}

// CountBy counts the requests by the value of header name (webhook-id
// counts deliveries, to find one sent twice).
func (r *Receiver) CountBy(name string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, q := range r.reqs {
		out[q.Header.Get(name)]++
	}
	return out
}
