package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homingdev/homing/models"
)

// docReceiver is a receiver of document versions: it records each request
// as it arrives (document name, version, the status it is answered), in
// arrival order, and answers by answer.
type docReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []docRequest
	answer func(doc string, version int) int
	// hold, when it says so, keeps a request unanswered until its sender
	// goes away; it is recorded with status 0.
	hold func(doc string, version int) bool
}

type docRequest struct {
	doc     string
	version int
	status  int
}

func newDocReceiver(t *testing.T, answer func(doc string, version int) int) *docReceiver {
	t.Helper()
	r := &docReceiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var doc struct {
			Name    string `json:"name"`
			Version int    `json:"version"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		if r.hold != nil && r.hold(doc.Name, doc.Version) {
			r.got = append(r.got, docRequest{doc.Name, doc.Version, 0})
			r.mu.Unlock()
			<-req.Context().Done()
			return
		}
		code := r.answer(doc.Name, doc.Version)
		r.got = append(r.got, docRequest{doc.Name, doc.Version, code})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *docReceiver) setAnswer(answer func(doc string, version int) int) {
	r.mu.Lock()
	r.answer = answer
	r.mu.Unlock()
}

func (r *docReceiver) requests() []docRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]docRequest(nil), r.got...)
}

// checkOrder holds every document's requests, in arrival order, to the
// guarantee: each request is for the version after the last one answered
// 2xx (none was Exhausted here), so no version arrives before the one
// before it was accepted, and none arrives again once accepted. It returns
// how many versions each document had accepted.
func checkOrder(t *testing.T, reqs []docRequest) map[string]int {
	t.Helper()
	accepted := map[string]int{}
	for i, r := range reqs {
		if r.version != accepted[r.doc]+1 {
			t.Errorf("request %d: %s version %d arrived after version %d was accepted; want version %d", i, r.doc, r.version, accepted[r.doc], accepted[r.doc]+1)
			continue
		}
		if r.status/100 == 2 {
			accepted[r.doc] = r.version
		}
	}
	return accepted
}

// postVersion publishes one version of doc through homing serve and fails the
// test unless it is accepted (202).
func postVersion(t *testing.T, httpc *http.Client, c apiClient, doc string, version int) {
	body := fmt.Sprintf(`{"id": "%s-v%d", "doc_type": "Order", "doc_name": %q, "event": "on_update", "doc": {"name": %q, "version": %d}}`, doc, version, doc, doc, version)
	req, _ := http.NewRequest("POST", c.base+"/v1/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := httpc.Do(req)
	if err != nil {
		t.Errorf("POST %s v%d: %v", doc, version, err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("POST %s v%d: %d, want 202", doc, version, resp.StatusCode)
	}
}

// TestOrderedDeliveryPerDocument publishes 100 documents × 5 versions
// through homing serve from ten concurrent publishers (each publishes a
// document's next version once the previous one was accepted, so the
// acceptance order of one document is its version order), interleaved
// across documents, while the receiver answers 503 to 30 % of its first
// 600 requests. Each document's versions 1..5 are accepted once each, in
// order, and no request for version k+1 arrives before version k was
// answered 2xx.
func TestOrderedDeliveryPerDocument(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: real processes")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	var n atomic.Int64
	rc := newDocReceiver(t, func(string, int) int {
		if n.Add(1) <= 600 && rand.IntN(10) < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	s.ok(t, nil, "homing", "webhook", "create", "--name", "ordered", "--doctype", "Order", "--event", "on_update",
		"--url", rc.URL, "--max-retries", "100", "--timeout", receiverTimeout, "--ordering", "document")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)

	const docs, versions, publishers = 100, 5, 10
	httpc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: publishers}}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for v := 1; v <= versions; v++ {
				for d := p; d < docs; d += publishers {
					postVersion(t, httpc, c, fmt.Sprintf("ORD-%03d", d), v)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	db := s.openDB(t)
	within(t, 4*time.Minute, "every version Delivered", func() (bool, string) {
		counts, err := statusCounts(db, "ordered")
		if err != nil {
			return false, err.Error()
		}
		return counts[models.StatusDelivered] == docs*versions, fmt.Sprintf("statuses %s, %d requests", countStatus(counts), len(rc.requests()))
	})
	s.stop()

	reqs := rc.requests()
	accepted := checkOrder(t, reqs)
	for d := range docs {
		if doc := fmt.Sprintf("ORD-%03d", d); accepted[doc] != versions {
			t.Errorf("%s: versions 1..%d accepted, want 1..%d", doc, accepted[doc], versions)
		}
	}
	failed := 0
	for _, r := range reqs {
		if r.status != http.StatusOK {
			failed++
		}
	}
	if failed == 0 {
		t.Errorf("no request was answered 503: the run tested nothing")
	}
	t.Logf("%d requests, %d answered 503", len(reqs), failed)
}

// TestAFailingDocumentHoldsOnlyItself: document A's first version is
// answered 503 while B's versions go through; A's second version is held
// behind its first (homing delivery show says so), never requested, until
// A's first is accepted, and then follows it.
func TestAFailingDocumentHoldsOnlyItself(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: real processes")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	rc := newDocReceiver(t, func(doc string, _ int) int {
		if doc == "A" {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	s.ok(t, nil, "homing", "webhook", "create", "--name", "ordered", "--doctype", "Order", "--event", "on_update",
		"--url", rc.URL, "--max-retries", "100", "--timeout", receiverTimeout, "--ordering", "document")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)
	httpc := &http.Client{Timeout: waitTimeout}
	postVersion(t, httpc, c, "A", 1)
	postVersion(t, httpc, c, "A", 2)
	for v := 1; v <= 3; v++ {
		postVersion(t, httpc, c, "B", v)
	}
	a1, a2 := s.deliveryOf(t, "A-v1"), s.deliveryOf(t, "A-v2")
	for v := 1; v <= 3; v++ {
		s.waitStatus(t, s.deliveryOf(t, fmt.Sprintf("B-v%d", v)), models.StatusDelivered)
	}
	eventually(t, "A's first version refused twice", func() (bool, string) {
		n := 0
		for _, r := range rc.requests() {
			if r.doc == "A" {
				n++
			}
		}
		return n >= 2, fmt.Sprintf("%d requests for A", n)
	})
	var held struct {
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
		WaitsFor string `json:"waits_for"`
	}
	s.ok(t, &held, "homing", "delivery", "show", a2, "--json")
	if held.Status != models.StatusFailed || held.Attempts != 0 || held.WaitsFor != a1 {
		t.Fatalf("A v2 while A v1 fails: %+v, want Failed, no attempt, waits_for %s", held, a1)
	}
	if r := s.run(t, "homing", "delivery", "show", a2); !strings.Contains(r.stdout, "behind delivery "+a1) {
		t.Errorf("delivery show does not say what A v2 waits for:\n%s", r)
	}
	rc.setAnswer(func(string, int) int { return http.StatusOK })
	s.waitStatus(t, a2, models.StatusDelivered)
	s.stop()
	accepted := checkOrder(t, rc.requests())
	if accepted["A"] != 2 || accepted["B"] != 3 {
		t.Errorf("accepted %v, want A 1..2 and B 1..3", accepted)
	}
}

// TestOrderedDeliveryWithTheWorkerKilledMidSend: the worker is SIGKILLed
// while document K's first version is at the receiver, unanswered. K's
// second version is never sent while the first is in that limbo; once the
// first's lease ends, a new worker sends it again (the one duplicate the
// README allows: the same version, before any later one), then the second.
// Document L is not held by any of it.
func TestOrderedDeliveryWithTheWorkerKilledMidSend(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: real processes")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	rc := newDocReceiver(t, func(string, int) int { return http.StatusOK })
	var held atomic.Bool
	rc.mu.Lock()
	rc.hold = func(doc string, version int) bool {
		return doc == "K" && version == 1 && held.CompareAndSwap(false, true)
	}
	rc.mu.Unlock()
	s.ok(t, nil, "homing", "webhook", "create", "--name", "ordered", "--doctype", "Order", "--event", "on_update",
		"--url", rc.URL, "--max-retries", "100", "--timeout", "5s", "--ordering", "document")
	worker := s.spawn(t, "worker", "worker started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)
	httpc := &http.Client{Timeout: waitTimeout}
	postVersion(t, httpc, c, "K", 1)
	postVersion(t, httpc, c, "K", 2)
	eventually(t, "K's first version at the receiver", func() (bool, string) {
		return held.Load(), fmt.Sprintf("%d requests", len(rc.requests()))
	})
	// K's second version waits behind the first as a delivery row: its
	// event fanned out before the kill. (A fan-out cut by the kill is
	// asynq's to recover once the dead worker's lease ends, another
	// scenario: TestWorkerKilled's.)
	k2 := s.deliveryOf(t, "K-v2")
	worker.kill(t)
	for v := 1; v <= 3; v++ {
		postVersion(t, httpc, c, "L", v)
	}
	s.spawn(t, "worker", "worker started")
	// The first version's lease (its timeout and a minute) ends before it
	// is sent again.
	within(t, 3*time.Minute, "K's second version Delivered", func() (bool, string) {
		var d delivery
		s.ok(t, &d, "homing", "delivery", "show", k2, "--json")
		return d.Status == models.StatusDelivered, d.Status
	})
	for v := 1; v <= 3; v++ {
		s.waitStatus(t, s.deliveryOf(t, fmt.Sprintf("L-v%d", v)), models.StatusDelivered)
	}
	s.stop()
	reqs := rc.requests()
	accepted := checkOrder(t, reqs)
	if accepted["K"] != 2 || accepted["L"] != 3 {
		t.Errorf("accepted %v, want K 1..2 and L 1..3", accepted)
	}
	k1 := 0
	for _, r := range reqs {
		if r.doc == "K" && r.version == 1 {
			k1++
		}
	}
	if k1 != 2 {
		t.Errorf("K's first version was received %d times, want twice (unanswered, then again after the kill)", k1)
	}
}
