package testenv

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/homingdev/homing/internal/intake/store"
)

// Proxy is a TCP proxy a test owns in front of PostgreSQL (or any server),
// which the test can cut, as a failed primary's host is, and restore,
// without touching the server everyone's tests share.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection to
// target (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// PostgresProxy is NewProxy in front of the server of the PostgreSQL URL
// dsn; it returns the proxy and dsn pointed at it.
func PostgresProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.addr
	return p, u.String()
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes the listener and every connection through the proxy: new
// connections are refused and open ones see their peer go away.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the same address.
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("testenv: proxy: listen again on %s: %v", p.addr, err)
	}
	p.serveLocked(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(ln, c) })
		}
	})
}

// forward pipes c to a new connection to the target, both ways, until
// either side closes or the proxy is cut.
func (p *Proxy) forward(ln net.Listener, c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // cut while dialling
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	// Either side ending (or Cut) closes both.
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	var both sync.WaitGroup
	both.Go(func() { pipe(up, c) })
	both.Go(func() { pipe(c, up) })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// SetReadOnly makes the PostgreSQL database of dsn read-only (on) or
// writable again, as a primary demoted by a failover is to the Homing still
// connected to it: default_transaction_read_only is set on the database and
// its open sessions are ended, so the next ones get the setting and a write
// fails with SQLSTATE 25006.
func SetReadOnly(t testing.TB, dsn string, on bool) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("testenv: read-only: %v", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin, err := store.Open(PostgresURL())
	if err != nil {
		t.Fatalf("testenv: read-only: %v", err)
	}
	defer func() { _ = store.Close(admin) }()
	stmt := "ALTER DATABASE " + quoteIdent(name) + " RESET default_transaction_read_only"
	if on {
		stmt = "ALTER DATABASE " + quoteIdent(name) + " SET default_transaction_read_only = on"
	}
	if err := admin.Exec(stmt).Error; err != nil {
		t.Fatalf("testenv: %s: %v", stmt, err)
	}
	if err := admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", name).Error; err != nil {
		t.Fatalf("testenv: end the sessions of %s: %v", name, err)
	}
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
