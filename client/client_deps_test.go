package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedDeps is everything package client may depend on, outside the
// standard library: Homing's publishing side, asynq and go-redis with what
// they import, and GORM with pgx (PublishTx takes a *gorm.DB, and the
// outbox's relay, in the same package as Add, listens with pgx). A service
// importing the client must not get the engine, the CLI or the
// configuration loader: viper, cobra, gonja, expr, SQLite, asynqmon's
// dependencies, dispatch.
var allowedDeps = []string{
	"github.com/homingdev/homing/client",
	"github.com/homingdev/homing/internal/intake/event",
	"github.com/homingdev/homing/internal/intake/outbox",
	"github.com/homingdev/homing/internal/intake/redisconn",
	"github.com/homingdev/homing/models",
	"github.com/homingdev/homing/internal/lib/clock",
	"github.com/homingdev/homing/internal/intake/dbstate",
	"github.com/homingdev/homing/internal/lib/jsondoc",
	"github.com/homingdev/homing/internal/lib/groupcommit",
	// asynq and go-redis
	"github.com/hibiken/asynq",
	"github.com/redis/go-redis/",
	"github.com/cespare/xxhash/",
	"github.com/robfig/cron/",
	"github.com/spf13/cast",
	"go.uber.org/atomic",
	"golang.org/x/sys/",
	"golang.org/x/time/",
	"google.golang.org/protobuf/",
	// GORM and pgx
	"gorm.io/gorm",
	"github.com/jinzhu/inflection",
	"github.com/jinzhu/now",
	"github.com/jackc/pgx/",
	"github.com/jackc/pgpassfile",
	"github.com/jackc/pgservicefile",
	"golang.org/x/text/",
	// event IDs
	"github.com/google/uuid",
	// Traces (issue 37): Publish and PublishTx join the caller's trace and
	// carry its W3C context with the event, which needs OpenTelemetry's
	// API (a span in the caller's context, the propagator) and what it
	// imports; never its SDK or exporters (deniedDeps).
	"github.com/homingdev/homing/internal/lib/tracing",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/auto/sdk",
	"github.com/go-logr/logr",
	"github.com/go-logr/stdr",
}

// deniedDeps are refused even where allowedDeps' prefixes would let them
// in: OpenTelemetry's SDK, exporters and instrumentation are what a
// process that traces sets up (internal/lib/tracing/otlp), not what a
// publisher imports.
var deniedDeps = []string{
	"go.opentelemetry.io/otel/sdk",
	"go.opentelemetry.io/otel/exporters/",
	"go.opentelemetry.io/contrib/",
	"google.golang.org/grpc",
}

// TestClientDependencies fails when package client grows past
// allowedDeps: look at what imports the new package (go list -deps -test
// would not tell; use `go mod why -m` or `go list -f '{{.Imports}}'` along
// the chain) before adding it to the list.
func TestClientDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/homingdev/homing/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	var extra []string
	for _, d := range deps {
		ok := false
		for _, a := range deniedDeps {
			if d == a || strings.HasPrefix(d, strings.TrimSuffix(a, "/")+"/") {
				t.Errorf("package client depends on %s, which a publisher must not import", d)
			}
		}
		for _, a := range allowedDeps {
			if d == a || strings.HasPrefix(d, strings.TrimSuffix(a, "/")+"/") {
				ok = true
				break
			}
		}
		if !ok {
			extra = append(extra, d)
		}
	}
	if len(extra) > 0 {
		t.Errorf("package client now depends on %d package(s) outside its allowed set:\n  %s", len(extra), strings.Join(extra, "\n  "))
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages, which cannot be right:\n%s", len(deps), out)
	}
	t.Logf("package client depends on %d non-standard packages", len(deps))
}
