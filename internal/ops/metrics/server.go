package metrics

import (
	"context"
	"fmt"
	"github.com/homingdev/homing/internal/lib/httpserve"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// ReadyTimeout is how long /readyz waits for the readiness check before
// answering 503: a probe that hangs is as bad as one that fails.
const ReadyTimeout = 2 * time.Second

// Server serves /metrics, /healthz and /readyz on one address.
type Server struct {
	*httpserve.Server
}

// NewServer builds a Server on addr (host:port; port 0 picks a free one).
// /healthz answers 200 while the process serves at all; /readyz answers 200
// when ready returns nil within ReadyTimeout, else 503 with its error. A nil
// ready is always ready.
func NewServer(addr string, m *Metrics, ready func(ctx context.Context) error, log *slog.Logger) *Server {
	return NewServerWarning(addr, m, ready, nil, log)
}

// NewServerWarning is NewServer whose /readyz also lists warnings (see
// ReadyHandlerWarning).
func NewServerWarning(addr string, m *Metrics, ready func(ctx context.Context) error, warnings func(ctx context.Context) []string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.CachedHandler())
	mux.Handle("GET /healthz", HealthHandler())
	mux.Handle("GET /readyz", ReadyHandlerWarning(ready, warnings))
	srv := httpserve.New("metrics", addr, mux, log)
	// Anyone who reaches the address may connect: no connection is held
	// past the deadlines, and no more than the cap at once.
	srv.SetLimits(httpserve.ProbeLimits())
	return &Server{srv}
}

// HealthHandler answers a liveness probe: 200 "ok" while the process serves
// at all.
func HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
}

// ReadyHandler answers a readiness probe: 200 when ready returns nil within
// ReadyTimeout, else 503 with its error. A nil ready is always ready.
func ReadyHandler(ready func(ctx context.Context) error) http.HandlerFunc {
	return ReadyHandlerWarning(ready, nil)
}

// ReadyHandlerWarning is ReadyHandler that also lists, after "ok", one
// "warning: …" line per problem warnings reports (preflight's start-up
// checks): a warning is for the operator to read, and never makes the
// process unready. A nil warnings reports none.
func ReadyHandlerWarning(ready func(ctx context.Context) error, warnings func(ctx context.Context) []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := checkReady(r.Context(), ready); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, err.Error()+"\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
		if warnings == nil {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
		defer cancel()
		for _, msg := range warnings(ctx) {
			_, _ = io.WriteString(w, "warning: "+msg+"\n")
		}
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
		// A check that honours its context answers as it ends, with an
		// error naming what did not answer: prefer that to this one's,
		// which names nothing (both are ready at once, and select would
		// pick either).
		select {
		case err := <-errc:
			return err
		case <-time.After(readyGrace):
		}
		return fmt.Errorf("readiness check did not answer within %s", ReadyTimeout)
	}
}

// readyGrace is how long checkReady waits, once ReadyTimeout has passed,
// for the check's own answer.
const readyGrace = 250 * time.Millisecond
