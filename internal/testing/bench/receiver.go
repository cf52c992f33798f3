package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// receiver is the fast loopback endpoint every scenario delivers to: HTTP/1.1
// with keep-alive, a 200 and a tiny body. It counts successful requests and
// the distinct webhook-id headers among them (a duplicate would be a bug),
// can fail a share of requests, and records enqueue → receive latency from
// the "sent_ns" field of the body when asked.
type receiver struct {
	url string
	srv *http.Server

	mu        sync.Mutex
	target    int
	done      chan struct{}
	ok        int
	failed    int
	seen      map[string]struct{}
	dups      int
	failEvery int // 0: never; 5: every fifth request answers 500
	// down answers 503 to every request (an outage), counted as failed;
	// firstOK is when the first 200 after an outage went out.
	down      bool
	firstOK   time.Time
	latencies []time.Duration
	record    bool
}

func newReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// expect starts a new count: done closes once target requests succeeded.
func (r *receiver) expect(target, failEvery int, record bool) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target, r.failEvery, r.record = target, failEvery, record
	r.ok, r.failed, r.dups = 0, 0, 0
	r.seen = make(map[string]struct{}, target)
	r.latencies = r.latencies[:0]
	r.down, r.firstOK = false, time.Time{}
	r.done = make(chan struct{})
	return r.done
}

// setDown starts (true) or ends an outage.
func (r *receiver) setDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
	if !down {
		r.firstOK = time.Time{}
	}
}

// firstSuccess is when the first request after expect (or the end of an
// outage) was answered 200; zero when none was.
func (r *receiver) firstSuccess() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstOK
}

type receiverCounts struct {
	OK, Failed, Duplicates int
}

func (r *receiver) counts() receiverCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return receiverCounts{OK: r.ok, Failed: r.failed, Duplicates: r.dups}
}

func (r *receiver) takeLatencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.latencies...)
}

var sentKey = []byte(`"sent_ns":`)

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	at := time.Now()
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	n := r.ok + r.failed
	if r.down {
		r.failed++
		r.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.firstOK.IsZero() {
		r.firstOK = at
	}
	if r.failEvery > 0 && n%r.failEvery == r.failEvery-1 {
		r.failed++
		r.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.ok++
	if _, dup := r.seen[id]; dup {
		r.dups++
	}
	r.seen[id] = struct{}{}
	if r.record {
		if sent, ok := sentAt(body); ok {
			r.latencies = append(r.latencies, at.Sub(sent))
		}
	}
	if r.ok == r.target {
		close(r.done)
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// sentAt finds "sent_ns":<int> in a JSON body without decoding all of it.
func sentAt(body []byte) (time.Time, bool) {
	i := bytes.Index(body, sentKey)
	if i < 0 {
		return time.Time{}, false
	}
	rest := bytes.TrimLeft(body[i+len(sentKey):], " ")
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	ns, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
