package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/lib/httpserve"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// The metrics server needs no token, so whoever reaches it may hold its
// connections. Clients that never finish their headers, and clients that
// send headers declaring a body they never send, are each closed by the
// server's deadlines (short here, so that the test waits for the event, not
// for a timer of its own); at no time does the server hold more
// connections than its cap, however many wait, and once they are gone it
// answers again.
func TestMetricsServerClosesSlowConnectionsWithinItsCap(t *testing.T) {
	t.Parallel()
	const maxConns = 4
	srv := metrics.NewServer("127.0.0.1:0", metrics.New(metrics.Options{}), nil, nil)
	srv.SetLimits(httpserve.Limits{ReadHeader: 50 * time.Millisecond, Read: 100 * time.Millisecond,
		Write: time.Minute, Idle: time.Minute, MaxConns: maxConns})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	const held = 3 * maxConns
	var closed atomic.Int64
	for i := range held {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		request := "GET /metrics HTTP/1.1\r\nHost: metrics\r\n" // headers never finished
		if i%2 == 1 {
			request = "GET /healthz HTTP/1.1\r\nHost: metrics\r\nContent-Length: 1000\r\n\r\n" // a body never sent
		}
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = io.Copy(io.Discard, c) // returns when the server closes the connection
			closed.Add(1)
		}()
	}
	testenv.Eventually(t, fmt.Sprintf("the server to close all %d slow connections", held), func() bool { return closed.Load() == held })
	testenv.Eventually(t, "the server to hold no connection", func() bool { open, _ := srv.Conns(); return open == 0 })
	if _, peak := srv.Conns(); peak < 1 || peak > maxConns {
		t.Errorf("the server held at most %d connections at once, want 1 to %d (its cap)", peak, maxConns)
	}
	if code, body := get(t, srv.Addr(), "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after the slow connections: %d %q", code, body)
	}
}

// Scrapes at once run one collection, and a scrape within
// metrics.scrape_cache (a second) of it is answered from it: a crowd of scrapers cannot multiply the database and
// Redis reads a collection makes. A second later, a scrape collects anew.
func TestConcurrentScrapesShareOneCollection(t *testing.T) {
	t.Parallel()
	clk := clock.NewStub(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	var collections atomic.Int64
	m := metrics.New(metrics.Options{ScrapeCache: time.Second, ScrapeNow: clk.Now, Backlog: func(context.Context) (int64, time.Time, error) {
		collections.Add(1) // every collection reads the backlog once
		return 0, time.Time{}, nil
	}})
	srv := metrics.NewServer("127.0.0.1:0", m, nil, nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	const scrapers = 8
	var wg sync.WaitGroup
	for range scrapers {
		wg.Go(func() {
			resp, err := http.Get("http://" + srv.Addr() + "/metrics")
			if err != nil {
				t.Errorf("scrape: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("scrape: %s", resp.Status)
			}
		})
	}
	wg.Wait()
	if n := collections.Load(); n != 1 {
		t.Errorf("%d concurrent scrapes ran %d collections, want 1", scrapers, n)
	}
	clk.Advance(time.Second)
	if _, ok := sample(scrape(t, srv.Addr()), "homing_due_backlog"); !ok || collections.Load() != 2 {
		t.Errorf("a scrape a second later: %d collections in all (homing_due_backlog present %v), want a second one", collections.Load(), ok)
	}
}
