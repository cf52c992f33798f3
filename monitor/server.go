package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// Server serves the UI on one address.
type Server struct {
	addr string
	log  *slog.Logger
	ui   *UI
	srv  *http.Server

	mu        sync.Mutex
	ln        net.Listener
	done      chan struct{}
	closeOnce sync.Once
}

// NewServer builds a Server for the queues in redis on addr (host:port; port
// 0 picks a free one). See Handler for readOnly.
func NewServer(addr string, redis asynq.RedisConnOpt, readOnly bool, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ui := Handler(redis, readOnly)
	return &Server{
		addr: addr,
		log:  log,
		ui:   ui,
		srv:  &http.Server{Handler: ui, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
	}
}

// Start listens on the address, so that a port in use is reported here, and
// serves in the background until Stop.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("monitor already started")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("serve monitor: %w", err)
	}
	s.ln, s.done = ln, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("monitor stopped", "addr", ln.Addr().String(), "error", err.Error())
		}
	}()
	return nil
}

// Stop closes the listener, waits up to ctx for requests in flight, and
// releases the UI's Redis connections.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	var err error
	if done != nil {
		err = s.srv.Shutdown(ctx)
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	s.closeOnce.Do(func() {
		if cerr := s.ui.Close(); cerr != nil && err == nil {
			err = cerr
		}
	})
	if err != nil {
		return fmt.Errorf("stop monitor: %w", err)
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
