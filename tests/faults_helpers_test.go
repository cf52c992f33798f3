package tests

import (
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// within is eventually with its own deadline, for waits that asynq's lease
// and recoverer make longer than waitTimeout. The deadline is for a stall,
// not for the whole wait: it counts from the last time cond's status
// changed, so a drain that keeps moving on a loaded machine is waited for
// (up to stallCap × timeout in all), and one that stops fails timeout after
// its last progress. How fast a drain goes is the benchmarks' to judge.
func within(t *testing.T, timeout time.Duration, what string, cond func() (done bool, status string)) {
	t.Helper()
	start := time.Now()
	last, lastStatus := start, ""
	for {
		done, status := cond()
		if done {
			return
		}
		now := time.Now()
		if status != lastStatus {
			last, lastStatus = now, status
		}
		switch {
		case now.Sub(last) > timeout:
			t.Fatalf("%s: no progress for %s (after %s in all); last: %s", what, timeout, now.Sub(start).Round(time.Second), status)
		case now.Sub(start) > stallCap*timeout:
			t.Fatalf("%s: still progressing but not done after %s (%d × %s); last: %s", what, now.Sub(start).Round(time.Second), stallCap, timeout, status)
		}
		time.Sleep(pollInterval) // a poll interval, not a synchronisation
	}
}

// stallCap bounds a wait that keeps progressing: stallCap × its timeout.
const stallCap = 5

// envValue is the value of key in env ("" when unset).
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			v = strings.TrimPrefix(kv, key+"=")
		}
	}
	return v
}

// withEnv returns a copy of env with key set to value.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// spawn starts a long-running binary with s.env, like s.start, but leaves it
// out of s.procs: the fault tests kill and restart it themselves. Cleanup
// kills it if it is still running.
func (s *system) spawn(t *testing.T, name, ready string) *process {
	t.Helper()
	p := &process{name: name, output: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(s.bin(), name))
	p.cmd.Env = s.env
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", name, p.cmd.Process.Pid, p.output.String())
		}
	})
	eventually(t, name+" to start", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("%s exited at start (%v):\n%s", name, p.err, p.output.String())
		default:
		}
		return strings.Contains(p.output.String(), ready), p.output.String()
	})
	return p
}

// kill SIGKILLs p and waits for it to be gone.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		t.Fatalf("%s survived SIGKILL for %s", p.name, waitTimeout)
	}
}

// terminate SIGTERMs p and checks that it exits 0.
func (p *process) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("signal %s: %v", p.name, err)
		return
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s did not exit 0 after SIGTERM: %v", p.name, p.err)
		}
	case <-time.After(waitTimeout):
		t.Errorf("%s did not stop within %s of SIGTERM", p.name, waitTimeout)
	}
}

// openDB opens the system's database for direct checks.
func (s *system) openDB(t *testing.T) *gorm.DB {
	t.Helper()
	// Two connections: tests run side by side on one PostgreSQL.
	db, err := store.OpenWith(envValue(s.env, "HOMING_DATABASE_URL"), store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	return db
}

// statusCounts counts the deliveries of webhook by status.
func statusCounts(db *gorm.DB, webhook string) (map[string]int, error) {
	var rows []struct {
		Status string
		N      int
	}
	err := db.Model(&models.Delivery{}).Select("status, count(*) AS n").
		Where("webhook_name = ?", webhook).Group("status").Scan(&rows).Error
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, err
}

// deliveriesOf returns the deliveries of webhook.
func deliveriesOf(t *testing.T, db *gorm.DB, webhook string) []models.Delivery {
	t.Helper()
	var rows []models.Delivery
	if err := db.Where("webhook_name = ?", webhook).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// repeatsBeyondTimeouts splits the 2xx receipts past each delivery's first
// (receipts: delivery ID → 2xx receipts) into those a timed-out attempt of
// the same delivery explains and the rest. An attempt the worker gave up on
// at its webhook's timeout is retried by design, and a receiver slowed by a
// loaded machine may still have answered it 2xx after the worker stopped
// waiting: that repeat is at-least-once delivery to a slow receiver (README,
// "Delivery guarantee": deduplicate on webhook-id), not a failure of the
// machinery these tests bound, which sends again only what it lost the
// record of. A delivery's timed-out attempts explain at most as many of its
// repeats as there are of them.
func repeatsBeyondTimeouts(t *testing.T, db *gorm.DB, receipts map[string]int) (beyond, timedOut int) {
	t.Helper()
	var ids []string
	for id, n := range receipts {
		if n > 1 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, 0
	}
	var rows []struct {
		DeliveryID string
		N          int
	}
	if err := db.Model(&models.Attempt{}).Select("delivery_id, count(*) AS n").
		Where("delivery_id IN ? AND class = ?", ids, string(send.ClassTimeout)).Group("delivery_id").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	timeouts := map[string]int{}
	for _, r := range rows {
		timeouts[r.DeliveryID] = r.N
	}
	for _, id := range ids {
		extra := receipts[id] - 1
		explained := min(extra, timeouts[id])
		timedOut += explained
		beyond += extra - explained
	}
	return beyond, timedOut
}

// okByID counts the 2xx receipts of each webhook-id.
func okByID(rs []testreceiver.Request) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		if r.Status/100 == 2 {
			out[r.Header.Get("webhook-id")]++
		}
	}
	return out
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// dbName is the database name in a postgres:// URL.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func countStatus(m map[string]int) string {
	return fmt.Sprint(m)
}

// stuck describes, for a wait's status, the deliveries of webhook not yet
// Delivered when there are at most a few of them: the state a stall left
// each in (attempts, next_retry, the sweep's queued_at mark, last_error),
// so that a wait that fails says why the row did not move.
func stuck(db *gorm.DB, webhook string) string {
	var rows []models.Delivery
	if err := db.Where("webhook_name = ? AND status <> ?", webhook, models.StatusDelivered).Order("id").Limit(6).Find(&rows).Error; err != nil {
		return "; rows unread: " + err.Error()
	}
	if len(rows) == 0 || len(rows) > 5 {
		return ""
	}
	var b strings.Builder
	now := time.Now()
	for _, r := range rows {
		fmt.Fprintf(&b, "; %s (event %s) %s attempts %d", r.ID, r.EventID, r.Status, r.Attempts)
		if r.NextRetry != nil {
			fmt.Fprintf(&b, " next_retry in %s", r.NextRetry.Sub(now).Round(time.Second))
		}
		if r.QueuedAt != nil {
			fmt.Fprintf(&b, " queued %s ago", now.Sub(*r.QueuedAt).Round(time.Second))
		}
		if r.LastError != "" {
			fmt.Fprintf(&b, " last_error %q", r.LastError)
		}
	}
	return b.String()
}
