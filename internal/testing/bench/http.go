package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/ops/token"
)

// httpResult is one run of the http scenario: the same N events end to end
// (published until every delivery is Delivered) through the Go client and
// through POST /v1/events, with a worker running throughout.
type httpResult struct {
	Events   int       `json:"events"`
	Clients  int       `json:"clients"`
	GoClient runResult `json:"go_client"`
	HTTP     runResult `json:"http"`
	// Ratio is HTTP's rate over the Go client's (target ≥ 0.8, issue 27).
	Ratio float64 `json:"http_vs_go_client"`
	// ServeCPUMS is homing serve's CPU per event.
	ServeCPUMS float64 `json:"serve_cpu_ms_per_event"`
	// GoClientCPUMS and HTTPCPUMS are each path's CPU per event: the
	// worker's, homing serve's (HTTP only) and their PostgreSQL backends',
	// the steadier number to compare the paths by. The publishers' own
	// CPU (this harness) is not in it.
	GoClientCPUMS float64 `json:"go_client_cpu_ms_per_event"`
	HTTPCPUMS     float64 `json:"http_cpu_ms_per_event"`
	// The parts: the worker's and the database's CPU per event on each
	// path (serve's is ServeCPUMS).
	GoClientWorkerMS float64 `json:"go_client_worker_cpu_ms_per_event"`
	GoClientDBMS     float64 `json:"go_client_database_cpu_ms_per_event"`
	HTTPWorkerMS     float64 `json:"http_worker_cpu_ms_per_event"`
	HTTPDBMS         float64 `json:"http_database_cpu_ms_per_event"`
	// ServeDBMS is the CPU per event of homing serve's PostgreSQL backends.
	ServeDBMS float64 `json:"serve_database_cpu_ms_per_event"`
}

// httpClients is how many keep-alive HTTP clients post at once, as in the
// issue's measurement.
const httpClients = 16

// runHTTP runs the http scenario once.
func (e *env) runHTTP(ctx context.Context, n, concurrency int) (httpResult, error) {
	res := httpResult{Events: n, Clients: httpClients}
	environ := e.homingEnv("HOMING_WORKER_CONCURRENCY="+strconv.Itoa(concurrency), "HOMING_API_ADDR=127.0.0.1:0")

	// The Go client path, end to end.
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	if err := e.createHooks(ctx, 1, 3); err != nil {
		return res, err
	}
	worker, err := startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
	if err != nil {
		return res, err
	}
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		_ = worker.stop()
		return res, err
	}
	red, err := e.redisNow(ctx)
	if err != nil {
		_ = worker.stop()
		return res, err
	}
	done := e.recv.expect(n, 0, false)
	start := time.Now()
	err = publishAll(ctx, pub, n, httpClients, benchDoc)
	_ = pub.Close()
	if err == nil {
		err = e.waitEndToEnd(ctx, done, n)
	}
	res.GoClient = runResult{Deliveries: n, Seconds: time.Since(start).Seconds(), Duplicates: e.recv.counts().Duplicates}
	res.GoClient.PerSecond = float64(n) / res.GoClient.Seconds
	if err == nil {
		res.GoClientWorkerMS, res.GoClientDBMS = e.pathCPU(ctx, n, worker)
		res.GoClientCPUMS = res.GoClientWorkerMS + res.GoClientDBMS
		res.GoClient.RedisCPUMS, res.GoClient.RedisCalls, err = red.since(ctx, e, n)
	}
	_ = worker.stop()
	if err != nil {
		return res, fmt.Errorf("go client: %w", err)
	}

	// The HTTP path, end to end: homing serve writes the outbox and relays
	// it, the worker fans out and releases the rows.
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	if err := e.createHooks(ctx, 1, 3); err != nil {
		return res, err
	}
	_, tok, err := token.New(e.db, nil, nil).Create(ctx, "bench", token.ScopePublish, "")
	if err != nil {
		return res, err
	}
	worker, err = startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil, environ, "worker started")
	if err != nil {
		return res, err
	}
	defer func() { _ = worker.stop() }()
	// Its own application_name tells its PostgreSQL backends apart.
	serveEnv := append(slices.Clone(environ), "HOMING_DATABASE_URL="+e.dsn+"&application_name="+serveAppName)
	if e.serveProfile != "" {
		serveEnv = append(serveEnv, "HOMING_TEST_CPUPROFILE="+e.serveProfile)
	}
	serve, err := startProcess("serve", e.binDir, filepath.Join(e.binDir, "homing"), []string{"serve"}, serveEnv, "api started")
	if err != nil {
		return res, err
	}
	defer func() { _ = serve.stop() }()
	addr, err := serve.logValue("api started", "addr")
	if err != nil {
		return res, err
	}
	cpuBefore, err := cpuTime(serve.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	if red, err = e.redisNow(ctx); err != nil {
		return res, err
	}
	done = e.recv.expect(n, 0, false)
	start = time.Now()
	err = postAll(ctx, "http://"+addr+"/v1/events", tok, n)
	if err == nil {
		err = e.waitEndToEnd(ctx, done, n)
	}
	res.HTTP = runResult{Deliveries: n, Seconds: time.Since(start).Seconds(), Duplicates: e.recv.counts().Duplicates}
	res.HTTP.PerSecond = float64(n) / res.HTTP.Seconds
	if err != nil {
		return res, fmt.Errorf("http: %w", err)
	}
	if cpu, err := cpuTime(serve.cmd.Process.Pid); err == nil {
		res.ServeCPUMS = perDelivery(cpu-cpuBefore, n)
		res.HTTPWorkerMS, res.HTTPDBMS = e.pathCPU(ctx, n, worker)
		if db, err := e.backendCPUOf(ctx, serveAppName); err == nil {
			res.ServeDBMS = perDelivery(db, n)
		}
		res.HTTPCPUMS = res.HTTPWorkerMS + res.HTTPDBMS + res.ServeDBMS + perDelivery(cpu, n)
	}
	if res.HTTP.RedisCPUMS, res.HTTP.RedisCalls, err = red.since(ctx, e, n); err != nil {
		return res, err
	}
	res.Ratio = res.HTTP.PerSecond / res.GoClient.PerSecond
	return res, nil
}

// pathCPU is the CPU per event, in ms, of worker (since it started) and of
// its PostgreSQL backends; 0 when it cannot be read.
func (e *env) pathCPU(ctx context.Context, n int, worker *process) (workerMS, databaseMS float64) {
	if w, err := cpuTime(worker.cmd.Process.Pid); err == nil {
		workerMS = perDelivery(w, n)
	}
	if db, err := e.backendCPU(ctx); err == nil {
		databaseMS = perDelivery(db, n)
	}
	return workerMS, databaseMS
}

// waitEndToEnd waits until the receiver got n deliveries and the database
// shows them Delivered.
func (e *env) waitEndToEnd(ctx context.Context, done <-chan struct{}, n int) error {
	if err := waitDone(ctx, done, 15*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return err
	}
	return e.waitDelivered(ctx, n)
}

// postAll posts events 0..n-1 to url from httpClients keep-alive clients.
func postAll(ctx context.Context, url, tok string, n int) error {
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConnsPerHost: httpClients, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	defer hc.CloseIdleConnections()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range httpClients {
		wg.Go(func() {
			for i := range next {
				body, _ := json.Marshal(map[string]any{"doc_type": "Sales Order", "doc_name": fmt.Sprintf("SO-%07d", i), "event": "on_submit", "doc": benchDoc(i)})
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := hc.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("POST /v1/events: %s", resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d posts failed, first: %w", len(errs), n, errs[0])
	}
	return errors.Join(errs...)
}
