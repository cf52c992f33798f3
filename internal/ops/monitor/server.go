package monitor

import (
	"context"
	"fmt"
	"github.com/homingdev/homing/internal/lib/httpserve"
	"log/slog"
	"sync"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/config"
)

// Server serves the UI on one address.
type Server struct {
	*httpserve.Server
	ui        *UI
	closeOnce sync.Once
}

// NewServer builds a Server for the queues in redis on addr (host:port; port
// 0 picks a free one). See Handler for readOnly, RequireAuth for auth (the
// zero value requires none).
func NewServer(addr string, redis asynq.RedisConnOpt, readOnly bool, auth config.MonitorAuth, log *slog.Logger) *Server {
	ui := Handler(redis, readOnly)
	srv := httpserve.New("monitor", addr, RequireAuth(SameOrigin(ui), auth), log)
	// The UI's pages are served before any authentication a proxy in
	// front adds: no connection is held past the deadlines, and no more
	// than the cap at once.
	srv.SetLimits(httpserve.ProbeLimits())
	return &Server{Server: srv, ui: ui}
}

// Stop closes the listener, waits up to ctx for requests in flight, and
// releases the UI's Redis connections.
func (s *Server) Stop(ctx context.Context) error {
	err := s.Server.Stop(ctx)
	s.closeOnce.Do(func() {
		if cerr := s.ui.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stop monitor: %w", cerr)
		}
	})
	return err
}
