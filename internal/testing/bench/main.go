// Command bench is Homing's benchmark harness (make bench). It runs against
// real PostgreSQL and Redis, in a database and Redis index of its own, with
// the worker as a real process delivering to a loopback receiver, and prints
// a table and writes bench/results.json:
//
//   - throughput: N events, one matching webhook, deliveries/s until every
//     delivery is Delivered; the same with 10 webhooks per event (N/10
//     events, so N deliveries), and with a receiver failing 20 % of requests;
//   - baseline: a bare asynq worker POSTing the same bodies to the same
//     receiver with no database, and Homing's throughput as a ratio of it;
//   - latency: enqueue → receiver p50/p95/p99 at a steady rate;
//   - sweep: one sweeper tick's time with 1,000 / 100,000 / 1,000,000 Failed
//     rows, one batch of them due;
//   - memory: the worker's peak RSS (VmHWM) in the throughput runs;
//   - publish: events/s from one process with the Go client;
//   - outage: N fresh events, then N more while the receiver answers 503,
//     drained when it answers again, at sweeper.interval 1s and at the
//     default; the drain rate as a ratio of the fresh rate of the same run;
//     and requests a minute to a dead endpoint holding -dead-rows due
//     retries, at the default configuration; and, with the scheduler
//     running throughout, the time from the receiver's return to the first
//     200 after outages of -outages (5s,15s,30s,50s): what the probes'
//     backoff decides.
//   - retries: N fresh events, then N due retries (Failed rows seeded with
//     COPY) drained by the same worker with a scheduler at
//     sweeper.interval 1s, receiver up: the drain rate as a ratio of the
//     fresh rate, and the worker's and database's CPU per delivery of
//     each (issue 27).
//   - http: N events posted to homing serve's POST /v1/events by 16
//     keep-alive clients, end to end until every delivery is Delivered,
//     beside the same N through the Go client in the same run (target:
//     HTTP ≥ 0.6 × Go client).
//   - tenants: -tenant-events events spread over -tenants tenants of 3
//     webhooks each (all 3 match), beside the same events in one tenant
//     with 3 webhooks; the fleet's CPU per delivery (worker + database) as
//     a ratio of one tenant's (target: ≤ 1.1 ×; tenants.go).
//   - ordered: -ordered-events events over -ordered-docs documents to one
//     webhook, unordered then ordered by document (ordering "document"),
//     receiver healthy: the ordered rate as a ratio of the unordered
//     (target: ≥ 0.7 ×); and the same events as versions of one document,
//     ordered (target: ≥ 100/s). Published with client.Publish, so each
//     version's place is drawn at its fan-out.
//   - growth (only when named: -scenarios growth): -growth-rows deliveries
//     (10,000,000 by default) seeded with COPY over 60 days, then the
//     claim, a sweep tick, the console's pages, a retention pass, and
//     first-attempt latency at -growth-rate without and with retention
//     passes running (docs/performance.md, "Growth").
//
// Absolute times drift on shared machines: compare the ratios, and medians of
// several runs. Only 127.0.0.1 is ever contacted.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/homingdev/homing/internal/testing/testotlp"
)

type options struct {
	n           int
	runs        int
	concurrency int
	scenarios   map[string]bool
	out         string
	latencyRate int
	latencyFor  time.Duration
	sweepSizes  []int
	sweepBatch  int
	publishers  int
	cpuProfile  string
	serveProf   string
	workerEnv   []string
	deadRows    int
	tenants     int
	tenantEvts  int
	outages     []time.Duration
	growthRows  int
	growthRate  int
	growthFor   time.Duration
	orderedEvts int
	orderedDocs int
}

var allScenarios = []string{"baseline", "throughput", "fanout", "failing", "latency", "sweep", "publish", "outage", "retries", "http", "tenants", "ordered", "growth"}

// defaultScenarios are what make bench runs: all but growth, which seeds
// millions of rows and runs only when named.
var defaultScenarios = slices.DeleteFunc(slices.Clone(allScenarios), func(s string) bool { return s == "growth" })

func main() {
	var (
		o          options
		quick      bool
		scenarios  string
		sweepSizes string
		role       string
		redisURL   string
		target     string
		cpuProfile string
		workerEnv  string
		outages    string
		traced     bool
	)
	flag.IntVar(&o.n, "n", 20000, "deliveries per throughput run")
	flag.IntVar(&o.runs, "runs", 3, "runs per scenario; medians are reported")
	flag.IntVar(&o.concurrency, "concurrency", 200, "worker.concurrency of the worker and the baseline")
	flag.StringVar(&scenarios, "scenarios", strings.Join(defaultScenarios, ","), "comma-separated scenarios to run, of "+strings.Join(allScenarios, ","))
	flag.StringVar(&o.out, "out", "bench/results.json", "where to write the results")
	flag.IntVar(&o.latencyRate, "latency-rate", 1000, "events/s in the latency scenario")
	flag.DurationVar(&o.latencyFor, "latency-duration", 30*time.Second, "how long the latency scenario publishes")
	flag.StringVar(&sweepSizes, "sweep-sizes", "1000,100000,1000000", "Failed rows in the sweep scenario, ascending")
	flag.IntVar(&o.sweepBatch, "sweep-batch", 500, "sweeper.batch_size, and how many rows are due")
	flag.IntVar(&o.deadRows, "dead-rows", 100000, "due retries of the dead endpoint in the outage scenario (0: no dead endpoint part)")
	flag.IntVar(&o.tenants, "tenants", 10000, "tenants (of 3 webhooks each) in the tenants scenario")
	flag.IntVar(&o.tenantEvts, "tenant-events", 20000, "events in each case of the tenants scenario (3 deliveries each)")
	flag.StringVar(&outages, "outages", "5s,15s,30s,50s", "outage lengths at which the outage scenario measures receiver back → first 200, the scheduler running throughout (none: no such part)")
	flag.IntVar(&o.orderedEvts, "ordered-events", 2000, "events in each case of the ordered scenario")
	flag.IntVar(&o.orderedDocs, "ordered-docs", 200, "documents the ordered scenario's events are versions of (its hot case has one)")
	flag.IntVar(&o.growthRows, "growth-rows", 10000000, "deliveries the growth scenario seeds")
	flag.IntVar(&o.growthRate, "growth-rate", 500, "events/s of the growth scenario's latency runs")
	flag.DurationVar(&o.growthFor, "growth-duration", 20*time.Second, "how long each of the growth scenario's latency runs publishes")
	flag.IntVar(&o.publishers, "publishers", 8, "goroutines publishing in the publish scenario (1 is also measured)")
	flag.BoolVar(&quick, "quick", false, "a fast pass for iteration: -n 2000, 5s of latency, sweep sizes 1000,10000,100000, 10000 tenant events")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "run the throughput scenarios' worker in-process and write its CPU profile here (no RSS then)")
	flag.StringVar(&o.serveProf, "serve-cpuprofile", "", "write homing serve's CPU profile in the http scenario here (HOMING_TEST_CPUPROFILE; each run overwrites it)")
	flag.StringVar(&workerEnv, "worker-env", "", "extra HOMING_* settings (and GO* runtime settings) for the worker and scheduler, comma-separated: HOMING_DATABASE_MAX_OPEN_CONNS=64,GOGC=200,...")
	flag.BoolVar(&traced, "trace", false, "run Homing's processes with tracing on (default sampler), exporting to an OTLP receiver in this process (OTEL_EXPORTER_OTLP_ENDPOINT)")
	flag.StringVar(&role, "role", "", "internal: baseline runs the bare asynq worker")
	flag.StringVar(&redisURL, "redis-url", "", "internal: the baseline's Redis")
	flag.StringVar(&target, "target", "", "internal: the baseline's receiver URL")
	flag.Parse()

	if role == "baseline" {
		if err := runBaselineWorker(redisURL, target, o.concurrency); err != nil {
			fmt.Fprintln(os.Stderr, "baseline:", err)
			os.Exit(1)
		}
		return
	}
	if quick {
		o.n, o.latencyFor, sweepSizes, o.deadRows, o.tenantEvts = 2000, 5*time.Second, "1000,10000,100000", 10000, 10000
	}
	o.cpuProfile = cpuProfile
	if traced {
		// Every process the harness starts inherits the variable.
		col := testotlp.Start()
		defer func() {
			fmt.Fprintf(os.Stderr, "bench: the OTLP receiver got %d spans in %d exports\n", len(col.Spans()), col.Requests())
			col.Close()
		}()
		_ = os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	}
	for _, v := range strings.Split(outages, ",") {
		if outages == "none" {
			break
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -outages: %q is not a positive duration (5s,30s)\n", v)
			os.Exit(2)
		}
		o.outages = append(o.outages, d)
	}
	for _, kv := range strings.Split(workerEnv, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		if !(strings.HasPrefix(kv, "HOMING_") || strings.HasPrefix(kv, "GO")) || !strings.Contains(kv, "=") {
			fmt.Fprintf(os.Stderr, "bench: -worker-env: %q is not HOMING_KEY=VALUE (or a Go runtime setting: GOGC=200)\n", kv)
			os.Exit(2)
		}
		o.workerEnv = append(o.workerEnv, kv)
	}
	o.scenarios = map[string]bool{}
	for _, s := range strings.Split(scenarios, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allScenarios, s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q (choose from %s)\n", s, strings.Join(allScenarios, ","))
			os.Exit(2)
		}
		o.scenarios[s] = true
	}
	for _, s := range strings.Split(sweepSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -sweep-sizes: %q is not a positive number\n", s)
			os.Exit(2)
		}
		o.sweepSizes = append(o.sweepSizes, n)
	}
	if o.runs < 1 || o.n < 10 || o.tenants < 2 || o.tenantEvts < 10 {
		fmt.Fprintln(os.Stderr, "bench: -runs must be at least 1, -n and -tenant-events at least 10, -tenants at least 2")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// results is what bench/results.json holds.
type results struct {
	Machine     machine                    `json:"machine"`
	N           int                        `json:"n"`
	Runs        int                        `json:"runs"`
	Concurrency int                        `json:"concurrency"`
	WorkerEnv   []string                   `json:"worker_env,omitempty"`
	Throughput  map[string][]runResult     `json:"throughput"`
	Latency     []latencyResult            `json:"latency,omitempty"`
	Sweep       []sweepResult              `json:"sweep,omitempty"`
	Publish     map[string][]publishResult `json:"publish,omitempty"`
	Outage      []outageResult             `json:"outage,omitempty"`
	Dead        []deadResult               `json:"dead_endpoint,omitempty"`
	Probe       []probeResult              `json:"probe,omitempty"`
	Retries     []retriesResult            `json:"retries,omitempty"`
	HTTP        []httpResult               `json:"http,omitempty"`
	Growth      *growthResult              `json:"growth,omitempty"`
	Summary     map[string]float64         `json:"summary"`
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) error {
	e, err := setup(ctx, logf)
	defer e.close()
	if err != nil {
		return err
	}
	e.cpuProfile, e.workerEnv, e.serveProfile = o.cpuProfile, o.workerEnv, o.serveProf
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := results{
		Machine: describeMachine(ctx, e), N: o.n, Runs: o.runs, Concurrency: o.concurrency, WorkerEnv: o.workerEnv,
		Throughput: map[string][]runResult{}, Publish: map[string][]publishResult{}, Summary: map[string]float64{},
	}
	logf("machine: %+v", r.Machine)

	// scenario is the -scenarios name a case runs under (its key when "").
	cases := []struct {
		key, scenario string
		tc            throughputCase
	}{
		{"throughput", "", throughputCase{name: "1 webhook", events: o.n, hooks: 1}},
		{"fanout", "", throughputCase{name: "10 webhooks per event", events: o.n / 10, hooks: 10}},
		{"failing", "", throughputCase{name: "receiver failing 20%", events: o.n, hooks: 1, failEvery: 5}},
		{"tenants", "tenants", throughputCase{name: fmt.Sprintf("%d tenants × 3 webhooks", o.tenants), events: o.tenantEvts, hooks: 3, tenants: o.tenants}},
		{"tenants_one", "tenants", throughputCase{name: "1 tenant × 3 webhooks", events: o.tenantEvts, hooks: 3}},
		{"ordered_none", "ordered", throughputCase{name: fmt.Sprintf("%d documents, unordered", o.orderedDocs), events: o.orderedEvts, hooks: 1, docs: o.orderedDocs}},
		{"ordered", "ordered", throughputCase{name: fmt.Sprintf("%d documents, ordered", o.orderedDocs), events: o.orderedEvts, hooks: 1, docs: o.orderedDocs, ordered: true}},
		{"ordered_hot", "ordered", throughputCase{name: "1 document, ordered", events: o.orderedEvts, hooks: 1, docs: 1, ordered: true}},
	}
	for i := range o.runs {
		if o.scenarios["baseline"] {
			res, err := e.runBaseline(ctx, o.n, o.concurrency, self)
			if err != nil {
				return fmt.Errorf("baseline: %w", err)
			}
			logf("baseline run %d: %d in %.2fs = %.0f/s, rss %.1f MiB, cpu %.3f ms/delivery + %.3f redis; redis calls/delivery: %s", i+1, res.Deliveries, res.Seconds, res.PerSecond, res.PeakRSSMiB, res.WorkerCPUMS, res.RedisCPUMS, res.RedisCalls)
			r.Throughput["baseline"] = append(r.Throughput["baseline"], res)
		}
		for _, c := range cases {
			if scenario := cmp.Or(c.scenario, c.key); !o.scenarios[scenario] {
				continue
			}
			res, err := e.runHoming(ctx, c.tc, o.concurrency)
			if err != nil {
				return fmt.Errorf("%s: %w", c.tc.name, err)
			}
			logf("%s run %d: %d in %.2fs = %.0f/s, rss %.1f MiB, cpu %.3f ms/delivery worker + %.3f database + %.3f redis, receiver failed %d, duplicates %d; redis calls/delivery: %s",
				c.key, i+1, res.Deliveries, res.Seconds, res.PerSecond, res.PeakRSSMiB, res.WorkerCPUMS, res.DatabaseCPUMS, res.RedisCPUMS, res.Failed, res.Duplicates, res.RedisCalls)
			r.Throughput[c.key] = append(r.Throughput[c.key], res)
		}
	}
	if o.scenarios["latency"] {
		for i := range o.runs {
			res, err := e.runLatency(ctx, o.latencyRate, o.latencyFor, o.concurrency)
			if err != nil {
				return fmt.Errorf("latency: %w", err)
			}
			logf("latency run %d: %+v", i+1, res)
			r.Latency = append(r.Latency, res)
		}
	}
	if o.scenarios["sweep"] {
		res, err := e.runSweep(ctx, o.sweepSizes, o.sweepBatch, o.runs, logf)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		for _, s := range res {
			logf("sweep %d rows: median %.1f ms %v, query alone %.2f ms", s.Rows, s.MedianMS, s.TicksMS, s.QueryMS)
		}
		r.Sweep = res
	}
	if o.scenarios["publish"] {
		for i := range o.runs {
			for _, g := range []int{1, o.publishers} {
				res, err := e.runPublish(ctx, o.n, g)
				if err != nil {
					return fmt.Errorf("publish: %w", err)
				}
				key := strconv.Itoa(g) + " goroutines"
				logf("publish run %d, %s: %.0f events/s", i+1, key, res.PerSecond)
				r.Publish[key] = append(r.Publish[key], res)
			}
		}
	}
	if o.scenarios["outage"] {
		for i := range o.runs {
			for _, interval := range []string{"1s", "5s"} {
				res, err := e.runOutage(ctx, o.n, o.concurrency, interval)
				if err != nil {
					return fmt.Errorf("outage: %w", err)
				}
				logf("outage run %d at sweeper.interval %s: %+v", i+1, interval, res)
				r.Outage = append(r.Outage, res)
			}
		}
		for i := range o.runs {
			for _, outage := range o.outages {
				res, err := e.runProbe(ctx, 200, o.concurrency, outage)
				if err != nil {
					return fmt.Errorf("outage of %s: %w", outage, err)
				}
				logf("probe run %d, outage %s: %+v", i+1, outage, res)
				r.Probe = append(r.Probe, res)
			}
		}
		// The window starts after the probes' backoff has reached
		// health.probe_interval (about 90 s, sweeper.ProbeGap): the
		// first minute and a half (the burst of retries in flight, then
		// about 20 probes in the first minute) is the burst.
		if o.deadRows > 0 {
			res, err := e.runDead(ctx, o.deadRows, o.concurrency, 100*time.Second, time.Minute)
			if err != nil {
				return fmt.Errorf("dead endpoint: %w", err)
			}
			logf("dead endpoint: %+v", res)
			r.Dead = append(r.Dead, res)
		}
	}
	if o.scenarios["retries"] {
		for i := range o.runs {
			res, err := e.runRetries(ctx, o.n, o.concurrency)
			if err != nil {
				return fmt.Errorf("retries: %w", err)
			}
			logf("retries run %d: %+v", i+1, res)
			r.Retries = append(r.Retries, res)
		}
	}
	if o.scenarios["http"] {
		for i := range o.runs {
			res, err := e.runHTTP(ctx, o.n, o.concurrency)
			if err != nil {
				return fmt.Errorf("http: %w", err)
			}
			logf("http run %d: go client %.0f/s, http %.0f/s (%.2f ×), homing serve %.3f ms CPU/event, CPU/event go client %.3f ms (worker %.3f + database %.3f), http %.3f ms (worker %.3f + its database %.3f + serve %.3f + its database %.3f), Redis %.3f and %.3f ms/event, duplicates %d + %d; redis calls/event: go client %s; http %s",
				i+1, res.GoClient.PerSecond, res.HTTP.PerSecond, res.Ratio, res.ServeCPUMS, res.GoClientCPUMS, res.GoClientWorkerMS, res.GoClientDBMS,
				res.HTTPCPUMS, res.HTTPWorkerMS, res.HTTPDBMS, res.ServeCPUMS, res.ServeDBMS, res.GoClient.RedisCPUMS, res.HTTP.RedisCPUMS,
				res.GoClient.Duplicates, res.HTTP.Duplicates, res.GoClient.RedisCalls, res.HTTP.RedisCalls)
			r.HTTP = append(r.HTTP, res)
		}
	}
	if o.scenarios["growth"] {
		res, err := e.runGrowth(ctx, o.growthRows, o.growthRate, o.growthFor, o.runs, o.concurrency, logf)
		if err != nil {
			return fmt.Errorf("growth: %w", err)
		}
		r.Growth = &res
	}
	summarize(&r, o)
	printTable(os.Stdout, r, o)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	logf("wrote %s", o.out)
	return nil
}

// summarize puts the medians and ratios the targets are stated in into
// r.Summary.
func summarize(r *results, o options) {
	med := func(key string) float64 {
		var xs []float64
		for _, x := range r.Throughput[key] {
			xs = append(xs, x.PerSecond)
		}
		return median(xs)
	}
	base := med("baseline")
	for _, key := range []string{"baseline", "throughput", "fanout", "failing", "tenants", "tenants_one", "ordered_none", "ordered", "ordered_hot"} {
		if len(r.Throughput[key]) == 0 {
			continue
		}
		r.Summary[key+"_per_second"] = med(key)
		var rss []float64
		for _, x := range r.Throughput[key] {
			rss = append(rss, x.PeakRSSMiB)
		}
		r.Summary[key+"_peak_rss_mib"] = slices.Max(rss)
		var wcpu, dcpu, rcpu []float64
		for _, x := range r.Throughput[key] {
			wcpu, dcpu, rcpu = append(wcpu, x.WorkerCPUMS), append(dcpu, x.DatabaseCPUMS), append(rcpu, x.RedisCPUMS)
		}
		r.Summary[key+"_worker_cpu_ms"], r.Summary[key+"_database_cpu_ms"] = median(wcpu), median(dcpu)
		r.Summary[key+"_redis_cpu_ms"] = median(rcpu)
		if base > 0 && key != "baseline" {
			r.Summary[key+"_vs_baseline"] = med(key) / base
		}
	}
	if fleet, one := r.Summary["tenants_worker_cpu_ms"]+r.Summary["tenants_database_cpu_ms"],
		r.Summary["tenants_one_worker_cpu_ms"]+r.Summary["tenants_one_database_cpu_ms"]; fleet > 0 && one > 0 {
		r.Summary["tenants_cpu_vs_one_tenant"] = fleet / one
		r.Summary["tenants_worker_cpu_vs_one_tenant"] = r.Summary["tenants_worker_cpu_ms"] / r.Summary["tenants_one_worker_cpu_ms"]
		r.Summary["tenants_per_second_vs_one_tenant"] = r.Summary["tenants_per_second"] / r.Summary["tenants_one_per_second"]
	}
	if ordered, none := r.Summary["ordered_per_second"], r.Summary["ordered_none_per_second"]; ordered > 0 && none > 0 {
		r.Summary["ordered_vs_unordered"] = ordered / none
	}
	if len(r.Latency) > 0 {
		var p50, p95, p99 []float64
		for _, l := range r.Latency {
			p50, p95, p99 = append(p50, l.P50MS), append(p95, l.P95MS), append(p99, l.P99MS)
		}
		r.Summary["latency_p50_ms"], r.Summary["latency_p95_ms"], r.Summary["latency_p99_ms"] = median(p50), median(p95), median(p99)
	}
	if len(r.Sweep) > 0 {
		first, last := r.Sweep[0], r.Sweep[len(r.Sweep)-1]
		r.Summary["sweep_smallest_ms"], r.Summary["sweep_largest_ms"] = first.MedianMS, last.MedianMS
		r.Summary["sweep_query_smallest_ms"], r.Summary["sweep_query_largest_ms"] = first.QueryMS, last.QueryMS
		if first.MedianMS > 0 {
			r.Summary["sweep_largest_vs_smallest"] = last.MedianMS / first.MedianMS
		}
	}
	for _, interval := range []string{"1s", "5s"} {
		var drain, ratio, detect, overall []float64
		for _, x := range r.Outage {
			if x.Interval == interval {
				drain, ratio = append(drain, x.DrainPerSecond), append(ratio, x.DrainVsFresh)
				detect, overall = append(detect, x.DetectSeconds), append(overall, x.OverallPerSecond)
			}
		}
		if len(drain) > 0 {
			r.Summary["outage_drain_per_second_"+interval] = median(drain)
			r.Summary["outage_drain_vs_fresh_"+interval] = median(ratio)
			r.Summary["outage_detect_seconds_"+interval] = median(detect)
			r.Summary["outage_overall_per_second_"+interval] = median(overall)
		}
	}
	if len(r.Retries) > 0 {
		var fresh, drain, ratio, overall, fw, fd, dw, dd, fr, dr []float64
		for _, x := range r.Retries {
			fr, dr = append(fr, x.FreshRedisCPUMS), append(dr, x.DrainRedisCPUMS)
			fresh, drain, ratio, overall = append(fresh, x.FreshPerSecond), append(drain, x.DrainPerSecond), append(ratio, x.DrainVsFresh), append(overall, x.OverallPerSecond)
			fw, fd = append(fw, x.FreshWorkerCPUMS), append(fd, x.FreshDatabaseCPUMS)
			dw, dd = append(dw, x.DrainWorkerCPUMS), append(dd, x.DrainDatabaseCPUMS)
		}
		r.Summary["retries_fresh_per_second"], r.Summary["retries_drain_per_second"] = median(fresh), median(drain)
		r.Summary["retries_drain_vs_fresh"], r.Summary["retries_overall_per_second"] = median(ratio), median(overall)
		r.Summary["retries_fresh_worker_cpu_ms"], r.Summary["retries_fresh_database_cpu_ms"] = median(fw), median(fd)
		r.Summary["retries_drain_worker_cpu_ms"], r.Summary["retries_drain_database_cpu_ms"] = median(dw), median(dd)
		r.Summary["retries_fresh_redis_cpu_ms"], r.Summary["retries_drain_redis_cpu_ms"] = median(fr), median(dr)
	}
	if len(r.Dead) > 0 {
		r.Summary["dead_endpoint_requests_per_minute"] = r.Dead[0].PerMinute
	}
	byOutage := map[float64][]float64{}
	var allDetect []float64
	for _, p := range r.Probe {
		byOutage[p.OutageSeconds] = append(byOutage[p.OutageSeconds], p.DetectSeconds)
		allDetect = append(allDetect, p.DetectSeconds)
	}
	for outage, xs := range byOutage {
		r.Summary[fmt.Sprintf("probe_detect_seconds_outage_%gs", outage)] = median(xs)
	}
	if len(allDetect) > 0 {
		r.Summary["probe_detect_seconds"] = median(allDetect)
	}
	if len(r.HTTP) > 0 {
		var gc, hp, ratio, cpu, gcCPU, hpCPU []float64
		for _, h := range r.HTTP {
			gc, hp, ratio, cpu = append(gc, h.GoClient.PerSecond), append(hp, h.HTTP.PerSecond), append(ratio, h.Ratio), append(cpu, h.ServeCPUMS)
			gcCPU, hpCPU = append(gcCPU, h.GoClientCPUMS), append(hpCPU, h.HTTPCPUMS)
		}
		r.Summary["http_go_client_cpu_ms"], r.Summary["http_cpu_ms"] = median(gcCPU), median(hpCPU)
		r.Summary["http_go_client_per_second"], r.Summary["http_per_second"] = median(gc), median(hp)
		r.Summary["http_vs_go_client"], r.Summary["http_serve_cpu_ms"] = median(ratio), median(cpu)
	}
	if g := r.Growth; g != nil {
		var without, with []float64
		for _, l := range g.Latency {
			if l.Retention {
				with = append(with, l.P99MS)
			} else {
				without = append(without, l.P99MS)
			}
		}
		r.Summary["growth_p99_ms"], r.Summary["growth_p99_retention_ms"] = median(without), median(with)
		if median(without) > 0 {
			r.Summary["growth_p99_retention_vs_without"] = median(with) / median(without)
		}
		r.Summary["growth_sweep_ms"] = g.Sweep.MedianMS
		r.Summary["growth_retention_rows_per_second"] = g.Retention.Alone.PerSecond
		var rows int64
		var secs float64
		for _, p := range g.Retention.UnderLoad {
			rows, secs = rows+p.Delivered+p.Exhausted, secs+p.Seconds
		}
		if secs > 0 {
			r.Summary["growth_retention_under_load_rows_per_second"] = float64(rows) / secs
		}
	}
	for key, rs := range r.Publish {
		var xs []float64
		for _, x := range rs {
			xs = append(xs, x.PerSecond)
		}
		r.Summary["publish_per_second_"+strings.ReplaceAll(key, " ", "_")] = median(xs)
	}
}
