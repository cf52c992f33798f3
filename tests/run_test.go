package tests

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// localRun is one `homing run` (make run) as a process: its banner on
// stdout, its logs on stderr.
type localRun struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error // set when done is closed
}

// startLocalRun runs `homing run` with env and args and waits for its
// banner's admin token line, printed once every part runs.
func startLocalRun(t *testing.T, env []string, args ...string) *localRun {
	t.Helper()
	r := &localRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(filepath.Join(binDir, "homing"), append([]string{"run"}, args...)...)
	r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = env, r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("homing run stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})
	eventually(t, "homing run to print its console and admin token", func() (bool, string) {
		select {
		case <-r.done:
			t.Fatalf("homing run exited at start (%v):\n%s\n%s", r.err, r.stdout, r.stderr)
		default:
		}
		return adminTokenLine.MatchString(r.stdout.String()), r.stdout.String()
	})
	return r
}

// stop sends SIGTERM and checks that the run exits 0.
func (r *localRun) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("homing run did not exit 0 after SIGTERM: %v", r.err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("homing run did not stop within %s of SIGTERM", waitTimeout)
	}
}

var (
	adminTokenLine = regexp.MustCompile(`(?m)^  admin token    : (\S+)$`)
	consoleLine    = regexp.MustCompile(`(?m)^  console        : (http://\S+)/console/$`)
)

// runEnv is the environment of a make run on the test's own database and
// Redis index, with no secrets.key (the run keeps a dev key) and a state
// directory of its own (never the user's key or token).
func runEnv(t *testing.T, redisURL string) (env []string, stateDir string) {
	t.Helper()
	stateDir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOMING_") && !strings.HasPrefix(kv, "XDG_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"HOMING_DATABASE_URL="+testenv.PostgresDSN(t),
		"HOMING_REDIS_URL="+redisURL,
		// Host-less (every interface, as the defaults were before
		// issue 35): the run must still listen on loopback only. Port 0:
		// no collision with a real run.
		"HOMING_API_ADDR=:0",
		"HOMING_METRICS_ADDR=:0",
		"HOMING_WORKER_SHUTDOWN_TIMEOUT=10s",
		"HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true", // the receiver is on loopback
		"XDG_STATE_HOME="+stateDir,
		"XDG_DATA_HOME="+t.TempDir(),
	)
	return env, stateDir
}

// TestMakeRunIsTheWholeSystemOnLoopback runs `homing run`, what make run
// runs, as a new user would (issue 34): it prints the console's URL and an
// admin token; the token signs in to the console and calls the API; a
// webhook with a generated secret gets an event signed with the dev key the
// run keeps; homing stats, from a shell without that key, does not warn
// that signed deliveries will not be sent, and says no worker runs once the
// run stopped; every socket the process listens on is on 127.0.0.1; its
// logs, on a pipe, are JSON.
func TestMakeRunIsTheWholeSystemOnLoopback(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	redisOpt, _ := testenv.Redis(t)
	env, stateDir := runEnv(t, testenv.RedisURL(redisOpt))
	run := startLocalRun(t, env, "--monitor-addr", "127.0.0.1:0")
	banner := run.stdout.String()
	tokenM, consoleM := adminTokenLine.FindStringSubmatch(banner), consoleLine.FindStringSubmatch(banner)
	if consoleM == nil {
		t.Fatalf("no console URL in the banner:\n%s", banner)
	}
	adminToken, base := tokenM[1], consoleM[1]
	if u, err := url.Parse(base); err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("console at %q, want 127.0.0.1", base)
	}
	keyFile := filepath.Join(stateDir, "homing", "dev-secrets.key")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 || !strings.Contains(banner, "secrets.key    : "+keyFile) {
		t.Errorf("dev secrets.key %s: %v, %v; want it kept (0600) and named in the banner", keyFile, fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, "homing", "dev-admin.token")); err != nil || strings.TrimSpace(string(b)) != adminToken {
		t.Errorf("admin token file holds %q (%v), want the printed token", b, err)
	}

	// The token signs in to the console.
	noRedirect := &http.Client{Timeout: waitTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/console/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "homing_console" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("console sign-in with the printed token: %s, cookie %v; want 303 and a session", resp.Status, session)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/console/", nil)
	req.AddCookie(session)
	if resp, err := noRedirect.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("console overview signed in: %v %v, want 200", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	// ...and calls the API: a signed webhook, sealed with the run's dev key.
	rc := testreceiver.New(t)
	api := apiClient{base: base, token: adminToken, pid: run.cmd.Process.Pid}
	created := api.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q, "generate_secret": true}`, rc.URL+"/orders"))
	secret, _ := created.body["secret"].(string)
	if secret == "" {
		t.Fatalf("no generated secret in %s", created.raw)
	}
	api.expect(t, http.StatusAccepted, "POST", "/v1/events",
		`{"id": "so-run", "doc_type": "Sales Order", "event": "on_submit", "doc": {"name": "SO-1", "grand_total": 1500}}`)
	eventually(t, "the receiver to get the signed delivery", func() (bool, string) {
		return len(rc.Requests()) == 1, fmt.Sprintf("%d requests", len(rc.Requests()))
	})
	got := rc.Requests()[0]
	if err := signing.Verify(signing.Secret(secret), got.Header, got.Body, 0); err != nil {
		t.Errorf("the delivery's signature does not verify with the webhook's secret: %v (headers %v)", err, got.Header)
	}

	// homing stats from another shell, which has no secrets.key: the
	// worker has the key, so there is nothing to warn about.
	shell := withEnv(withEnv(env, "XDG_STATE_HOME", t.TempDir()), "HOMING_LOG_FORMAT", "json")
	stats := func() (out string, secretsKey []string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(plainDir, "homing"), "stats", "--json")
		cmd.Env = shell
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("homing stats --json: %v\n%s", err, b)
		}
		var st struct {
			Problems []struct{ Check, Message string } `json:"problems"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("homing stats --json: %v\n%s", err, b)
		}
		for _, p := range st.Problems {
			if p.Check == "secrets_key" {
				secretsKey = append(secretsKey, p.Message)
			}
		}
		return string(b), secretsKey
	}
	// The worker is listed once asynq's first heartbeat is in: until then
	// stats says no worker runs (a secrets_key problem too).
	eventually(t, "homing stats to find the running worker's key", func() (bool, string) {
		out, problems := stats()
		return len(problems) == 0, out
	})

	// Every socket the process listens on is on loopback, and the API,
	// the metrics and the monitor UI are among them.
	listening := listeners(t, run.cmd.Process.Pid)
	if len(listening) < 3 {
		t.Errorf("homing run listens on %v, want the API, the metrics and the monitor UI", listening)
	}
	for _, a := range listening {
		if !a.Addr().IsLoopback() {
			t.Errorf("homing run listens on %s, not on loopback", a)
		}
	}
	apiHost, _ := url.Parse(base)
	if !containsPort(listening, apiHost.Port()) {
		t.Errorf("the console's port %s is not among the listeners %v", apiHost.Port(), listening)
	}

	// Its logs, written to a pipe, are JSON (log.format auto).
	lines := bufio.NewScanner(strings.NewReader(run.stderr.String()))
	for lines.Scan() {
		if !json.Valid(lines.Bytes()) {
			t.Errorf("log line on a pipe is not JSON: %q", lines.Text())
			break
		}
	}

	run.stop(t)
	out, problems := stats()
	if len(problems) != 1 || !strings.Contains(problems[0], "no worker is running") {
		t.Errorf("homing stats once the run stopped: %s, want one secrets_key problem saying no worker is running", out)
	}
}

// TestMakeRunWithoutRedisRunsDev: with no Redis answering, make run runs
// homing dev (an embedded Redis) and says why, instead of failing.
func TestMakeRunWithoutRedisRunsDev(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL")
	}
	env, _ := runEnv(t, fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t)))
	run := startLocalRun(t, env, "--monitor-addr", "")
	if out := run.stdout.String(); !strings.Contains(out, "IN MEMORY ONLY") || !consoleLine.MatchString(out) {
		t.Errorf("homing run without Redis printed:\n%s\nwant homing dev's banner with the console", out)
	}
	if !strings.Contains(run.stderr.String(), "running homing dev instead") {
		t.Errorf("homing run without Redis did not say it runs homing dev:\n%s", run.stderr.String())
	}
	run.stop(t)
}

// listeners are the TCP sockets process pid listens on, read from /proc:
// its open socket inodes matched against the kernel's tables.
func listeners(t *testing.T, pid int) []netip.AddrPort {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot read the process's sockets (not Linux?): %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			ap, err := procAddr(f[1])
			if err != nil {
				t.Fatalf("/proc/%d/net/%s: %v", pid, table, err)
			}
			out = append(out, ap)
		}
	}
	return out
}

// procAddr parses /proc/net/tcp's "0100007F:1F90": the address in 32-bit
// words of host byte order (little-endian here), the port in hex.
func procAddr(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexAddr)
	if !ok || err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", s)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

func containsPort(aps []netip.AddrPort, port string) bool {
	for _, ap := range aps {
		if strconv.Itoa(int(ap.Port())) == port {
			return true
		}
	}
	return false
}
