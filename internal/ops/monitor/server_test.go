package monitor_test

import (
	"testing"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/lib/httpserve"
	"github.com/homingdev/homing/internal/ops/monitor"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// The monitor needs no token unless monitor.auth is set: its server holds
// no connection past the deadlines the metrics server has, nor more than
// their cap (internal/ops/metrics/server_test.go shows what those limits do to slow
// clients).
func TestMonitorServerHasTheProbeLimits(t *testing.T) {
	t.Parallel()
	opt, _ := testenv.Redis(t)
	srv := monitor.NewServer("127.0.0.1:0", opt, true, config.MonitorAuth{}, nil)
	got := srv.Limits()
	if got != httpserve.ProbeLimits() || got.Read <= 0 || got.ReadHeader <= 0 || got.Idle <= 0 || got.MaxConns <= 0 {
		t.Errorf("monitor server limits: %+v, want %+v (read, header and idle deadlines and a connection cap)", got, httpserve.ProbeLimits())
	}
}
