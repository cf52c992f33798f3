package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ReadyTimeout is how long /readyz waits for the readiness check before
// answering 503: a probe that hangs is as bad as one that fails.
const ReadyTimeout = 2 * time.Second

// Server serves /metrics, /healthz and /readyz on one address.
type Server struct {
	addr string
	log  *slog.Logger
	srv  *http.Server

	mu   sync.Mutex
	ln   net.Listener
	done chan struct{}
}

// NewServer builds a Server on addr (host:port; port 0 picks a free one).
// /healthz answers 200 while the process serves at all; /readyz answers 200
// when ready returns nil within ReadyTimeout, else 503 with its error. A nil
// ready is always ready.
func NewServer(addr string, m *Metrics, ready func(ctx context.Context) error, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", readyHandler(ready))
	return &Server{
		addr: addr,
		log:  log,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
	}
}

// readyHandler answers a readiness probe.
func readyHandler(ready func(ctx context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := checkReady(r.Context(), ready); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, err.Error()+"\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}
}

// checkReady runs ready with ReadyTimeout, also when ready itself ignores
// its context.
func checkReady(ctx context.Context, ready func(ctx context.Context) error) error {
	if ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- ready(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return fmt.Errorf("readiness check did not answer within %s", ReadyTimeout)
	}
}

// Start listens on the address, so that a port in use is reported here, and
// serves in the background until Stop.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("metrics server already started")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	s.ln, s.done = ln, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", "addr", ln.Addr().String(), "error", err.Error())
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
		return fmt.Errorf("stop metrics server: %w", err)
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
