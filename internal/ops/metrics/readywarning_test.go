package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/homingdev/homing/internal/ops/metrics"
)

// TestReadyListsWarningsAndStaysReady: the start-up checks' problems are
// listed on /readyz, which stays 200: a warning is for the operator, it
// must not take the process out of service. An unready process is 503
// whatever the warnings.
func TestReadyListsWarningsAndStaysReady(t *testing.T) {
	t.Parallel()
	warn := func(context.Context) []string { return []string{"redis_eviction: set maxmemory-policy noeviction"} }
	rec := httptest.NewRecorder()
	metrics.ReadyHandlerWarning(func(context.Context) error { return nil }, warn).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 || rec.Body.String() != "ok\nwarning: redis_eviction: set maxmemory-policy noeviction\n" {
		t.Errorf("ready with a warning: %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	metrics.ReadyHandlerWarning(func(context.Context) error { return errors.New("database: down") }, warn).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || rec.Body.String() != "database: down\n" {
		t.Errorf("unready: %d %q", rec.Code, rec.Body.String())
	}
}
