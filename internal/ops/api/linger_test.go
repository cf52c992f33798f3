package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// rawPost opens a connection of its own to the API and sends the headers of
// a POST to path with token, declaring a body of length bytes, as a client
// that writes its body itself.
func (s *server) rawPost(path, token string, length int64) net.Conn {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: homing\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, token, length); err != nil {
		s.t.Fatal(err)
	}
	return conn
}

// rawPublish is rawPost of a POST /v1/events.
func (s *server) rawPublish(length int64) net.Conn {
	s.t.Helper()
	return s.rawPost("/v1/events", s.publish, length)
}

// readResponse reads one response from br, body included.
func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, string(body)
}

// readAnswer reads one response from conn, then what follows it, which
// must be the end of the stream: the server closed the connection cleanly.
func readAnswer(t *testing.T, conn net.Conn) (*http.Response, string) {
	t.Helper()
	br := bufio.NewReader(conn)
	resp, body := readResponse(t, br)
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the answer: %v, want the end of the stream", err)
	}
	return resp, body
}

// lingered makes the API report each lingering close on the returned
// channel, with the deadlines idle and total.
func lingered(idle, total time.Duration) (func(*options), <-chan int64) {
	ch := make(chan int64, 16)
	return func(o *options) {
		o.linger = func(a *api.Server) { a.SetLinger(idle, total, func(n int64) { ch <- n }) }
	}, ch
}

// A client that writes its whole body before it reads the answer (as
// Python's requests does) reads the 503 of a request refused before its
// body was read, every time: the server answers, then reads and discards
// the body to its end before it closes, so the close sends no reset. Closed
// at once (as from 5dbdacc), with 16 MiB still coming, the connection was
// reset while the client wrote, and the client never read its answer. The
// deadlines are out of reach here: the bytes decide, not the machine's
// speed.
func TestRefusedRequestsClientReadsTheAnswerAfterWritingItsBody(t *testing.T) {
	t.Parallel()
	const maxBody = 32 << 20
	withLinger, discarded := lingered(time.Hour, time.Hour)
	s := newServer(t, withLinger, func(o *options) {
		o.maxBodyBytes = maxBody
		o.maxInflightBytes = maxBody * api.IntakeMemoryFactor
	})
	// A request of unknown length holds the whole budget while its body is
	// open: every other request is refused before its body is read.
	s.openPublish(-1, `{"id"`)
	testenv.Eventually(t, "the held request's charge", func() bool { return s.api.IntakeHeld() == maxBody*api.IntakeMemoryFactor })

	// More than loopback's socket buffers take: the client is still
	// writing when the answer comes.
	const length = 16 << 20
	body := make([]byte, length)
	for i := range 3 {
		conn := s.rawPublish(length)
		if _, err := conn.Write(body); err != nil {
			t.Fatalf("publish %d: writing its body: %v; the server reset the connection before the client read its answer", i, err)
		}
		resp, text := readAnswer(t, conn)
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || !strings.Contains(text, "api.max_inflight_bytes") {
			t.Errorf("publish %d: %d %q (closing %v), want 503 naming api.max_inflight_bytes, closing the connection", i, resp.StatusCode, text, resp.Close)
		}
		if n := <-discarded; n != length {
			t.Errorf("publish %d: the server discarded %d bytes of its body, want all %d", i, n, length)
		}
	}
}

// A refused client that keeps sending without reading is cut off once the
// server has discarded api.max_body_bytes (64 KiB here) of what it
// declared (1 TiB): the connection is closed, and the client's writes fail.
// The deadlines are out of reach, so only the byte bound can end it.
func TestRefusedClientThatKeepsSendingIsCutOffAtTheBound(t *testing.T) {
	t.Parallel()
	withLinger, discarded := lingered(time.Hour, time.Hour)
	s := newServer(t, withLinger)
	conn := s.rawPublish(1 << 40) // over api.max_body_bytes: 413, unread
	chunk := make([]byte, 512)
	for {
		if _, err := conn.Write(chunk); err != nil {
			break // the event: the server closed the connection
		}
	}
	if n := <-discarded; n != 64<<10 {
		t.Errorf("the server discarded %d bytes before it closed, want api.max_body_bytes, %d", n, 64<<10)
	}
}

// A refused client that sends nothing more and keeps its connection open is
// answered, then cut off at the lingering close's deadline (here one that
// has passed at once): it reads the whole answer, then the end of the
// stream.
func TestRefusedClientThatStopsSendingIsCutOffAtTheDeadline(t *testing.T) {
	t.Parallel()
	withLinger, discarded := lingered(time.Nanosecond, time.Hour)
	s := newServer(t, withLinger)
	conn := s.rawPublish(1 << 40)
	resp, text := readAnswer(t, conn)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close || !strings.Contains(text, "api.max_body_bytes") {
		t.Errorf("%d %q (closing %v), want 413 naming api.max_body_bytes, closing the connection", resp.StatusCode, text, resp.Close)
	}
	if n := <-discarded; n != 0 {
		t.Errorf("the server discarded %d bytes, want none: the client sent none", n)
	}
}

// A create whose body fits the intake budget but whose evaluation does not
// (a held publish takes most of what the body leaves) is refused 503
// before its body is read too, and lingers the same way: its client,
// writing a 16 MiB body before it reads, reads the 503. Its charge is
// given back with the answer, not after the linger: while the connection
// of a client that has read its 503 still lingers, the budget holds only
// the held publish.
func TestEvaluationRefusalLingersWithoutItsCharge(t *testing.T) {
	t.Parallel()
	const maxBody, length = 32 << 20, 16 << 20
	const held = api.MinRequestBytes * api.IntakeMemoryFactor // a publish of 4 KiB or less
	withLinger, discarded := lingered(time.Hour, time.Hour)
	s := newServer(t, withLinger, func(o *options) {
		o.maxBodyBytes = maxBody
		// The create's body fits beside the held publish; an evaluation
		// (8 × 16 KiB) does not, though it would alone.
		o.maxInflightBytes = length*api.IntakeMemoryFactor + 8*int64(o.maxPayloadBytes)
	})
	s.openPublish(api.MinRequestBytes, `{"id"`)
	testenv.Eventually(t, "the held publish's charge", func() bool { return s.api.IntakeHeld() == held })

	conn := s.rawPost("/v1/webhooks", s.admin, length)
	if _, err := conn.Write(make([]byte, length)); err != nil {
		t.Fatalf("writing the create's body: %v; the server reset the connection before the client read its answer", err)
	}
	resp, text := readAnswer(t, conn)
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || !strings.Contains(text, "api.max_inflight_bytes") {
		t.Errorf("create: %d %q (closing %v), want 503 naming api.max_inflight_bytes, closing the connection", resp.StatusCode, text, resp.Close)
	}
	if n := <-discarded; n != length {
		t.Errorf("the server discarded %d bytes of the create's body, want all %d", n, length)
	}

	// A client that reads its 503 and keeps its connection open, sending
	// nothing: it lingers, holding nothing of the budget.
	idle := s.rawPost("/v1/webhooks", s.admin, length)
	if resp, _ := readResponse(t, bufio.NewReader(idle)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second create: %d, want 503", resp.StatusCode)
	}
	if got := s.api.IntakeHeld(); got != held || len(discarded) != 0 {
		t.Errorf("while the refused connection lingers (lingering closes ended: %d), the budget holds %d bytes, want the held publish's %d", len(discarded), got, held)
	}
	_ = idle.Close()
	if n := <-discarded; n != 0 {
		t.Errorf("the server discarded %d bytes of a body never sent", n)
	}
}
