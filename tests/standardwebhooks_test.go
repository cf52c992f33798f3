package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// nodeLine is one line the Node.js receiver prints.
type nodeLine struct {
	Listening int    `json:"listening"`
	N         int    `json:"n"`
	ID        string `json:"id"`
	TS        string `json:"ts"`
	Verified  bool   `json:"verified"`
	Error     string `json:"error"`
	Status    int    `json:"status"`
}

// TestOfficialStandardWebhooksReceiverVerifiesFirstAttemptAndRetry runs a
// receiver that verifies with the npm standardwebhooks package against real
// worker and scheduler processes: attempt 1 is refused with 503, the retry a
// (compressed) schedule gap later must verify too, with its own timestamp.
func TestOfficialStandardWebhooksReceiverVerifiesFirstAttemptAndRetry(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; scripts/services.sh does not install it")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed")
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "receiver.mjs"} {
		b, err := os.ReadFile(filepath.Join("node", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inst := exec.Command(npm, "install", "--no-audit", "--no-fund", "--silent")
	inst.Dir = dir
	if out, err := inst.CombinedOutput(); err != nil {
		t.Fatalf("npm install standardwebhooks: %v\n%s", err, out)
	}

	s := newSystem(t)
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	var created struct {
		Secret string `json:"secret"`
	}
	// The receiver needs the secret, the webhook needs the receiver's port:
	// generate the secret first.
	gen := s.run(t, "homing", "webhook", "create", "--name", "probe", "--doctype", "Probe", "--event", "on_update",
		"--url", "http://127.0.0.1:1/", "--secret", "--json")
	if gen.code != 0 {
		t.Fatalf("create: %s", gen)
	}
	if err := json.Unmarshal([]byte(gen.stdout), &created); err != nil || !strings.HasPrefix(created.Secret, "whsec_") {
		t.Fatalf("generated secret: %v %q", err, gen.stdout)
	}

	rcv := exec.Command(node, "receiver.mjs")
	rcv.Dir = dir
	rcv.Env = append(os.Environ(), "SECRET="+created.Secret)
	out, err := rcv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	rcv.Stderr = os.Stderr
	if err := rcv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rcv.Process.Kill(); _ = rcv.Wait() })
	var (
		mu    sync.Mutex
		lines []nodeLine
	)
	scanner := bufio.NewScanner(out)
	go func() {
		for scanner.Scan() {
			var l nodeLine
			if json.Unmarshal(scanner.Bytes(), &l) == nil {
				mu.Lock()
				lines = append(lines, l)
				mu.Unlock()
			}
		}
	}()
	snapshot := func() []nodeLine {
		mu.Lock()
		defer mu.Unlock()
		return append([]nodeLine(nil), lines...)
	}
	var port int
	eventually(t, "node receiver to listen", func() (bool, string) {
		for _, l := range snapshot() {
			if l.Listening != 0 {
				port = l.Listening
			}
		}
		return port != 0, "no port yet"
	})
	s.ok(t, nil, "homing", "webhook", "update", "probe", "--url", fmt.Sprintf("http://127.0.0.1:%d/hook", port))
	s.ok(t, nil, "enqueue", "--doctype", "Probe", "--event", "on_update", "--event-id", "std-1", "--doc", `{"name": "P-1", "qty": 3}`)
	id := s.deliveryOf(t, "std-1")
	d := s.waitStatus(t, id, "Delivered")
	got := snapshot()
	var reqs []nodeLine
	for _, l := range got {
		if l.N > 0 {
			reqs = append(reqs, l)
		}
	}
	if len(reqs) != 2 || d.Attempts != 2 {
		t.Fatalf("receiver saw %+v, delivery %s", reqs, d)
	}
	for _, r := range reqs {
		if !r.Verified {
			t.Errorf("request %d did not verify with standardwebhooks: %s", r.N, r.Error)
		}
		if r.ID != id {
			t.Errorf("request %d webhook-id %q, want %q", r.N, r.ID, id)
		}
	}
	t1, _ := strconv.ParseInt(reqs[0].TS, 10, 64)
	t2, _ := strconv.ParseInt(reqs[1].TS, 10, 64)
	if t2 <= t1-1 {
		t.Errorf("retry timestamp %d is not fresh (first %d)", t2, t1)
	}
	s.stop()
}
