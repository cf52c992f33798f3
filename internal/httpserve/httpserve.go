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

	mu   sync.Mutex
	ln   net.Listener
	done chan struct{}
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
	s.ln, s.done = ln, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(s.name+" stopped", "addr", ln.Addr().String(), "error", err.Error())
		}
	}()
	return nil
}

// Stop closes the listener and waits, up to ctx, for requests in flight. It
// does nothing if the server was never started.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
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
