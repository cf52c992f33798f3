package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownRedisDatabases is how many database indexes the tests' own Redis
// has: index 0 holds the reservations, the others go one to a test.
const ownRedisDatabases = 64

// ownRedis is the redis-server this binary started for its tests, if any.
var ownRedis struct {
	once sync.Once
	addr string
	err  error
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// RedisAddr is the host:port of the Redis server tests use: the one
// HOMING_TEST_REDIS_URL names, whose database indexes the tests may empty,
// or else a redis-server of the tests' own (ownRedisServer). A developer's
// Redis on 6379 is used only when named.
func RedisAddr() (string, error) {
	if raw := os.Getenv("HOMING_TEST_REDIS_URL"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("HOMING_TEST_REDIS_URL %q is not a redis://host:port URL", raw)
		}
		return u.Host, nil
	}
	ownRedis.once.Do(func() { ownRedis.addr, ownRedis.err = startOwnRedis() })
	return ownRedis.addr, ownRedis.err
}

// startOwnRedis starts the tests' own redis-server: on a free loopback
// port, in a temporary directory, keeping nothing on disk. It runs until
// Run returns, and dies with this binary if the binary is killed
// (parentDeathSignal), so a killed run leaves no server behind.
func startOwnRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server is not installed: scripts/services.sh installs it (or set HOMING_TEST_REDIS_URL to a Redis whose databases the tests may empty)")
	}
	dir, err := os.MkdirTemp("", "homing-test-redis-")
	if err != nil {
		return "", fmt.Errorf("test redis: %w", err)
	}
	// A port found free may be taken before redis-server binds it: try a
	// few times.
	for try := 0; ; try++ {
		addr, err := startRedisAt(bin, dir)
		if err == nil {
			return addr, nil
		}
		if try == 4 {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
}

func startRedisAt(bin, dir string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", fmt.Errorf("test redis: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var out bytes.Buffer
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(ownRedisDatabases), "--logfile", "")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = parentDeathSignal()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("test redis: start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	deadline := time.Now().Add(WaitTimeout)
	for {
		select {
		case <-done:
			return "", fmt.Errorf("test redis: redis-server on %s exited at start:\n%s", addr, out.String())
		default:
		}
		if rdb.Ping(context.Background()).Err() == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return "", fmt.Errorf("test redis: redis-server on %s did not answer within %s:\n%s", addr, WaitTimeout, out.String())
		}
		time.Sleep(10 * time.Millisecond) // waiting for a process to listen, with the deadline above
	}
	ownRedis.cmd, ownRedis.dir, ownRedis.done = cmd, dir, done
	return addr, nil
}

// StopRedis stops the tests' own redis-server, if RedisAddr started one,
// and removes its directory. Run calls it; a program that is not a test
// (the benchmark harness) calls it when done.
func StopRedis() {
	if ownRedis.cmd == nil {
		return
	}
	_ = ownRedis.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ownRedis.done:
	case <-time.After(10 * time.Second):
		_ = ownRedis.cmd.Process.Kill()
		<-ownRedis.done
	}
	_ = os.RemoveAll(ownRedis.dir)
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
