// Package httpserve runs one http.Handler on one address with the
// Start(ctx)/Stop(ctx) life cycle every Homing service has (app.Service),
// and Addr: Start listens
// synchronously (so a port in use is reported at start-up) and serves in the
// background; Stop drains requests in flight.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server serves a handler on one address.
type Server struct {
	name string
	addr string
	log  *slog.Logger
	srv  *http.Server

	mu     sync.Mutex
	ln     net.Listener
	done   chan struct{}
	limits Limits
	conns  *capListener
}

// Limits bound what clients can hold of a server whose routes need no
// token (metrics, the monitor): how long a request's headers, its whole
// request (its body included) and its answer may take, how long an idle
// connection stays open, and how many connections may be open at once.
// Without them a client that never finishes its headers or its body holds
// a connection, a goroutine and a descriptor for ever.
type Limits struct {
	ReadHeader time.Duration // http.Server.ReadHeaderTimeout
	Read       time.Duration // http.Server.ReadTimeout: headers and body
	Write      time.Duration // http.Server.WriteTimeout
	Idle       time.Duration // http.Server.IdleTimeout
	// MaxConns caps the connections open at once: past it, new ones wait
	// in the listen backlog until one closes. 0 is no cap.
	MaxConns int
}

// ProbeLimits are the Limits of the metrics and monitor servers: a scrape
// or a page has seconds to send its request, and its answer a minute (a
// scrape reads the database and Redis); 64 connections at once is far
// more than scrapers and operators open.
func ProbeLimits() Limits {
	return Limits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: time.Minute, Idle: time.Minute, MaxConns: 64}
}

// New builds a Server named name (for errors and logs) on addr (host:port;
// port 0 picks a free one).
func New(name, addr string, h http.Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		name: name, addr: addr, log: log,
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
	}
}

// SetLimits bounds the server's requests and connections (Limits); call it
// before Start.
func (s *Server) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = l
}

// Limits are the bounds SetLimits gave (the zero Limits when none).
func (s *Server) Limits() Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits
}

// Conns reports how many connections the server holds open now and the
// most it ever held at once: what Limits.MaxConns bounds.
func (s *Server) Conns() (open, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return 0, 0
	}
	return s.conns.counts()
}

// Start listens on the address and serves in the background until Stop.
// A port in use is reported here, at start-up.
func (s *Server) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return fmt.Errorf("%s already started", s.name)
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("serve %s: %w", s.name, err)
	}
	if l := s.limits; l != (Limits{}) {
		s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout = l.ReadHeader, l.Read, l.Write, l.Idle
	}
	s.conns = newCapListener(ln, s.limits.MaxConns)
	ln = s.conns
	s.ln, s.done = ln, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(s.name+" stopped", "addr", ln.Addr().String(), "error", err.Error())
		}
	}()
	return nil
}

// Stop closes the listener and waits, up to ctx, for requests in flight.
// Those still in flight when ctx ends (their handlers wait on a database
// that is gone, say) are cut off: their connections are closed, which
// cancels their requests' contexts, and the cut is logged. That is the
// bounded stop the shutdown timeout asks for, not a failure: a request cut
// off was not answered, so nothing it did was promised to its client (a
// publish is accepted only with its 202, once committed), and the client
// tries again. It does nothing if the server was never started.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil && ctx.Err() != nil {
		s.log.Warn(s.name+": requests still in flight at the end of the shutdown timeout are cut off, unanswered (their clients try again)",
			"addr", s.Addr())
		err = s.srv.Close()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", s.name, err)
	}
	return nil
}

// Addr is the address the server listens on once started (the port chosen
// for ":0"), and the configured one before.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.addr
}

// capListener accepts at most cap connections open at once (0: any number),
// counting them: Accept waits for a slot before it takes a connection from
// the backlog, and each connection gives its slot back when closed.
type capListener struct {
	net.Listener
	slots  chan struct{} // nil without a cap
	closed chan struct{} // closed by Close: a waiting Accept gives up

	closeOnce  sync.Once
	mu         sync.Mutex
	open, peak int
}

func newCapListener(ln net.Listener, max int) *capListener {
	c := &capListener{Listener: ln, closed: make(chan struct{})}
	if max > 0 {
		c.slots = make(chan struct{}, max)
	}
	return c
}

func (c *capListener) counts() (open, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peak
}

func (c *capListener) Accept() (net.Conn, error) {
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
		case <-c.closed:
			return nil, net.ErrClosed
		}
	}
	conn, err := c.Listener.Accept()
	if err != nil {
		c.release()
		return nil, err
	}
	c.mu.Lock()
	c.open++
	c.peak = max(c.peak, c.open)
	c.mu.Unlock()
	return &cappedConn{Conn: conn, l: c}, nil
}

func (c *capListener) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Listener.Close()
}

// release gives back a slot taken by Accept.
func (c *capListener) release() {
	if c.slots != nil {
		<-c.slots
	}
}

// cappedConn gives its listener's slot back once, when closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
		c.l.release()
	})
	return err
}
