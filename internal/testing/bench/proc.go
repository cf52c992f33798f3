package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a worker, scheduler or baseline worker run as its own process,
// so its peak RSS is its own. Its output goes to a file in the build
// directory (the worker logs a line per attempt, as in production).
type process struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	done chan struct{}
	err  error
}

// startProcess runs path with args and environ and waits until its output
// contains ready.
func startProcess(name, dir, path string, args, environ []string, ready string) (*process, error) {
	out, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: exec.Command(path, args...), out: out, done: make(chan struct{})}
	p.cmd.Env = environ
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(out.Name())
		if bytes.Contains(b, []byte(ready)) {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start (%v):\n%s", name, p.err, b)
		default:
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("%s did not start within 60s:\n%s", name, b)
		}
		time.Sleep(20 * time.Millisecond) // polling a child's output with a deadline
	}
}

// peakRSS is the process's VmHWM: the most resident memory it ever had.
func (p *process) peakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
}

// stop sends SIGTERM and waits for the exit; after 30 s it kills.
func (p *process) stop() error {
	defer p.out.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		p.kill()
		return fmt.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's CPU times.
const clockTicks = 100

// cpuTime is the user + system CPU time pid has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// logValue reads key from the first JSON log line of p whose msg is msg
// (the address homing serve chose for api.addr 127.0.0.1:0).
func (p *process) logValue(msg, key string) (string, error) {
	b, err := os.ReadFile(p.out.Name())
	if err != nil {
		return "", err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil || m["msg"] != msg {
			continue
		}
		if v, ok := m[key].(string); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s logged no %q line with %s:\n%s", p.name, msg, key, b)
}
