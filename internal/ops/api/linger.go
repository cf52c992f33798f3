package api

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"time"
)

// linger bounds the lingering close of a refused request's connection
// (refuseUnread), as nginx's lingering_timeout and lingering_time bound
// its lingering_close: the connection stays open while the client sends
// more of its body, idle for at most idle between reads and at most total
// in all. Transport time: the wall clock.
type linger struct {
	idle, total time.Duration
}

// lingerIdle and lingerTotal are nginx's lingering_timeout and
// lingering_time defaults.
const (
	lingerIdle  = 5 * time.Second
	lingerTotal = 30 * time.Second
)

// lingerSlack is what a body sent without a length may add to
// api.max_body_bytes in chunk framing and trailers before its connection is
// cut.
const lingerSlack = 64 << 10

// lingerBytes is the most a refusal of r discards of what follows its
// headers: the rest of its declared body up to api.max_body_bytes (the
// whole of any body the API could have taken, so its client always reads
// the answer), or api.max_body_bytes and some framing when it is chunked.
func (s *Server) lingerBytes(r *http.Request) int64 {
	if r.ContentLength >= 0 {
		return min(r.ContentLength, s.cfg.MaxBodyBytes)
	}
	return s.cfg.MaxBodyBytes + lingerSlack
}

// refuseUnread answers a request refused before its body was read (413 by
// its declared length, 503 over api.max_inflight_bytes for its body's
// charge or an evaluation's) with the response write produces, at once,
// and ends its connection with a bounded lingering close, as nginx does:
// the answer; whatever the request holds of the intake budget given back;
// the connection's write side half-closed; what the client still sends of
// its body read and discarded until the client closes, up to lingerBytes
// and within s.linger; then the close.
//
// Closed at once with its body unread (5dbdacc), the connection answered
// the client's next segments with a reset, which can fail the client's
// write before it reads the answer, or destroy the answer in its receive
// buffer: a client still writing its body saw "broken pipe" or
// "connection reset by peer" instead of the 503. Read to the end of the
// body, as net/http reads for a handler that did not, the connection had
// no deadline and no bound past 256 KiB, so a client trickling its body
// kept a goroutine and a connection outside the intake budget as long as
// it liked. Lingering is bounded both ways: a client sending a body the
// API could have taken reads its answer, and one that keeps sending is
// cut off at the bound.
func (s *Server) refuseUnread(w http.ResponseWriter, r *http.Request, write func(http.ResponseWriter)) {
	rec := &recorder{header: w.Header().Clone()}
	write(rec)
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// No connection of its own to end (HTTP/2): net/http answers and
		// closes it.
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Set("Connection", "close")
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
		return
	}
	rec.header.Set("Date", time.Now().UTC().Format(http.TimeFormat)) // transport time
	resp := &http.Response{
		StatusCode: rec.status, ProtoMajor: 1, ProtoMinor: 1, Header: rec.header, Close: true, Request: r,
		Body: io.NopCloser(bytes.NewReader(rec.body)), ContentLength: int64(len(rec.body)),
	}
	// Discarding holds a buffer, not the body: the request's charge goes
	// back now (release is idempotent; the handler's deferred one finds
	// nothing left).
	if g, ok := r.Context().Value(grantKey{}).(*grant); ok {
		g.release()
	}
	var discarded int64
	if resp.Write(rw.Writer) == nil && rw.Flush() == nil {
		discarded = lingerClose(conn, rw.Reader, s.lingerBytes(r), s.linger)
	}
	_ = conn.Close()
	if s.lingered != nil {
		s.lingered(discarded)
	}
}

// lingerClose half-closes conn's write side (the client reads the answer,
// then the end of the stream), then reads and discards from r (conn,
// through its buffered reader) until the client closes its side, max bytes
// have been discarded, or l's deadlines pass; it reports how many bytes it
// discarded. A client that sent no more than max has then nothing left
// unread, so the caller's close sends it no reset.
func lingerClose(conn net.Conn, r io.Reader, max int64, l linger) int64 {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	end := time.Now().Add(l.total) // transport time, as every deadline here
	buf := make([]byte, 32<<10)
	var n int64
	for n < max {
		deadline := time.Now().Add(l.idle)
		if deadline.After(end) {
			deadline = end
		}
		_ = conn.SetReadDeadline(deadline)
		k, err := r.Read(buf[:min(int64(len(buf)), max-n)])
		n += int64(k)
		if err != nil {
			break
		}
	}
	return n
}
