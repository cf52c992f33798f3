package preflight_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestStatsJudgesSecretsByTheWorkersReports: homing stats runs in a shell
// whose secrets.key says nothing of the workers'. It warns that signed
// deliveries will not be sent only when a running worker reports no key,
// or a key that does not open a webhook's secret, naming that worker; with
// no worker running it says so; a shell without a key beside a worker
// with the right one is no problem (issue 34).
func TestStatsJudgesSecretsByTheWorkersReports(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	redisOpt, _ := testenv.Redis(t)
	ctx := context.Background()
	sealing := testenv.SecretBox(t)
	create := func(box *secretbox.Box, name string) {
		t.Helper()
		svc := webhook.New(db, box, clock.Real{}, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
		doctype, event, url, secret := "Sales Order", "on_submit", "https://erp.example.com/h", "a-signing-secret-123456"
		if _, err := svc.Create(ctx, "", webhook.Input{Name: &name, DocType: &doctype, Event: &event, URL: &url, Secret: &secret}); err != nil {
			t.Fatal(err)
		}
	}
	create(sealing, "orders")
	none, _ := secretbox.New("")
	wrong := testenv.SecretBox(t)
	stats := func(shell *secretbox.Box) string {
		return checks(preflight.Run(ctx, preflight.Inputs{Config: config.Default(), DB: db, Redis: redisOpt, Box: shell, WorkerSecrets: true}))["secrets_key"]
	}
	host, _ := os.Hostname()
	me := fmt.Sprintf("worker %s (pid %d)", host, os.Getpid())

	if got := stats(sealing); !strings.Contains(got, "no worker is running") || !strings.Contains(got, `"orders"`) {
		t.Errorf("no worker running: %q", got)
	}

	// worker runs a worker as process.Worker does: its report first (when
	// report), then an asynq server, listed in Redis once it beats.
	worker := func(box *secretbox.Box, report bool) (*preflight.Reporter, func()) {
		t.Helper()
		rep := preflight.NewReporter(redisOpt, db, box, nil)
		if report {
			if err := rep.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		srv := asynq.NewServer(redisOpt, asynq.Config{Queues: map[string]int{"default": 1}, LogLevel: asynq.FatalLevel})
		if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the worker to be listed", func() bool {
			ws, err := preflight.Workers(ctx, redisOpt)
			return err == nil && len(ws) == 1
		})
		return rep, func() {
			srv.Shutdown()
			if err := rep.Stop(ctx); err != nil {
				t.Error(err)
			}
		}
	}

	_, stop := worker(none, true)
	if got := stats(sealing); !strings.Contains(got, me+" runs without a secrets.key") || !strings.Contains(got, `"orders"`) {
		t.Errorf("a worker without a key: %q", got)
	}
	stop()

	_, stop = worker(wrong, true)
	want := fmt.Sprintf("the secrets.key (fingerprint %s) of %s does not open the secret of webhook \"orders\"", wrong.Fingerprint(), me)
	if got := stats(none); !strings.Contains(got, want) {
		t.Errorf("a worker with the wrong key: %q, want %q", got, want)
	}
	stop()

	// The case: the worker has the key, the shell does not.
	rep, stop := worker(sealing, true)
	if got := stats(none); got != "" {
		t.Errorf("a worker with the right key, a shell without one: %q", got)
	}
	if got := stats(wrong); !strings.Contains(got, "this shell's secrets.key (fingerprint "+wrong.Fingerprint()+") is not the running workers' ("+sealing.Fingerprint()+")") {
		t.Errorf("a shell with another key than the worker's: %q", got)
	}
	// A webhook sealed later with another key is found at the next report.
	create(wrong, "a-first-by-name")
	if err := rep.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stats(none); !strings.Contains(got, `does not open the secret of webhook "a-first-by-name"`) {
		t.Errorf("a webhook sealed with another key after the worker started: %q", got)
	}
	stop()
	if ws, err := preflight.Workers(ctx, redisOpt); err != nil || len(ws) != 0 {
		t.Errorf("a stopped worker is still listed: %+v, %v", ws, err)
	}

	// A worker that writes no report (an older Homing) is named, not
	// guessed about.
	_, stop = worker(sealing, false)
	if got := stats(sealing); !strings.Contains(got, me+" runs without reporting its secrets.key") {
		t.Errorf("a worker without a report: %q", got)
	}
	stop()
}
