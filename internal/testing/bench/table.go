package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
)

// machine describes where the numbers were taken.
type machine struct {
	Cores             int    `json:"cores"`
	CPU               string `json:"cpu"`
	Go                string `json:"go"`
	Postgres          string `json:"postgres"`
	SynchronousCommit string `json:"synchronous_commit"`
	Redis             string `json:"redis"`
	LoadAverage       string `json:"load_average_at_start"`
}

func describeMachine(ctx context.Context, e *env) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAverage = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	_ = e.db.WithContext(ctx).Raw("SHOW server_version").Row().Scan(&m.Postgres)
	_ = e.db.WithContext(ctx).Raw("SHOW synchronous_commit").Row().Scan(&m.SynchronousCommit)
	if info, err := e.rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.Redis = v
			}
		}
	}
	return m
}

func printTable(w io.Writer, r results, o options) {
	s := r.Summary
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nHoming benchmark: N=%d, %d run(s), concurrency %d, %d cores (%s), PostgreSQL %s (synchronous_commit=%s), Redis %s\n\n",
		r.N, r.Runs, r.Concurrency, r.Machine.Cores, r.Machine.CPU, r.Machine.Postgres, r.Machine.SynchronousCommit, r.Machine.Redis)
	fmt.Fprintln(tw, "scenario\tmedian\tvs baseline\tpeak RSS\tCPU ms/delivery (worker + database; Redis)\ttarget")
	row := func(key, label, target string) {
		if _, ok := s[key+"_per_second"]; !ok {
			return
		}
		ratio := "-"
		if v, ok := s[key+"_vs_baseline"]; ok {
			ratio = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(tw, "%s\t%.0f deliveries/s\t%s\t%.1f MiB\t%.3f + %.3f; %.3f\t%s\n", label, s[key+"_per_second"], ratio, s[key+"_peak_rss_mib"],
			s[key+"_worker_cpu_ms"], s[key+"_database_cpu_ms"], s[key+"_redis_cpu_ms"], target)
	}
	row("baseline", "bare asynq worker (no database)", "")
	row("throughput", "Homing, 1 webhook", "≥ 0.60 × baseline; RSS ≤ 100 MiB")
	row("fanout", "Homing, 10 webhooks per event", "")
	row("failing", "Homing, receiver failing 20%", "")
	row("tenants", fmt.Sprintf("Homing, %d tenants × 3 webhooks (all match)", o.tenants), "")
	row("tenants_one", "Homing, 1 tenant × 3 webhooks, same events", "")
	row("ordered_none", fmt.Sprintf("Homing, %d events over %d documents, unordered", o.orderedEvts, o.orderedDocs), "")
	row("ordered", fmt.Sprintf("Homing, %d events over %d documents, ordered", o.orderedEvts, o.orderedDocs), fmt.Sprintf("≥ 0.70 × unordered: %.2f ×", s["ordered_vs_unordered"]))
	row("ordered_hot", fmt.Sprintf("Homing, 1 document × %d versions, ordered", o.orderedEvts), "≥ 100/s")
	if v, ok := s["tenants_cpu_vs_one_tenant"]; ok {
		fmt.Fprintf(tw, "%d tenants vs 1 tenant	%.2f × the rate			%.2f × the CPU (worker alone %.2f ×)	≤ 1.10 × the CPU\n",
			o.tenants, s["tenants_per_second_vs_one_tenant"], v, s["tenants_worker_cpu_vs_one_tenant"])
	}
	if _, ok := s["latency_p99_ms"]; ok {
		fmt.Fprintf(tw, "latency at %d events/s for %s\tp50 %.1f ms, p95 %.1f ms, p99 %.1f ms\t\t\t\tp99 ≤ 50 ms\n",
			o.latencyRate, o.latencyFor, s["latency_p50_ms"], s["latency_p95_ms"], s["latency_p99_ms"])
	}
	for i, sw := range r.Sweep {
		target := ""
		if i == len(r.Sweep)-1 && len(r.Sweep) > 1 {
			target = fmt.Sprintf("≤ 1.5 × smallest: %.2f ×", s["sweep_largest_vs_smallest"])
		}
		fmt.Fprintf(tw, "sweep tick, %d Failed rows (%d due)\t%.1f ms (query %.2f ms)\t\t\t\t%s\n", sw.Rows, sw.Due, sw.MedianMS, sw.QueryMS, target)
	}
	for _, interval := range []string{"1s", "5s"} {
		if v, ok := s["outage_drain_vs_fresh_"+interval]; ok {
			fmt.Fprintf(tw, "outage drain, sweeper.interval %s\t%.0f deliveries/s (%.1f s to detect, %.0f/s overall)\t%.2f × fresh\t\t\t≥ 0.50 × fresh\n",
				interval, s["outage_drain_per_second_"+interval], s["outage_detect_seconds_"+interval], s["outage_overall_per_second_"+interval], v)
		}
	}
	if v, ok := s["retries_drain_vs_fresh"]; ok {
		fmt.Fprintf(tw, "retries drain (N due rows, sweeper.interval 1s)\t%.0f deliveries/s (fresh %.0f/s, %.0f/s from the scheduler's start)\t%.2f × fresh\t\t%.3f + %.3f (fresh %.3f + %.3f); %.3f (fresh %.3f)\t≥ 0.90 × fresh\n",
			s["retries_drain_per_second"], s["retries_fresh_per_second"], s["retries_overall_per_second"], v,
			s["retries_drain_worker_cpu_ms"], s["retries_drain_database_cpu_ms"], s["retries_fresh_worker_cpu_ms"], s["retries_fresh_database_cpu_ms"],
			s["retries_drain_redis_cpu_ms"], s["retries_fresh_redis_cpu_ms"])
	}
	for _, d := range r.Dead {
		fmt.Fprintf(tw, "dead endpoint, %d due retries\t%.1f requests/min (burst %d in the first %.0f s)\t\t\t\t≤ 10 requests/min\n",
			d.DueRows, d.PerMinute, d.Burst, d.FirstSeconds)
	}
	for _, key := range []string{"1 goroutines", fmt.Sprintf("%d goroutines", o.publishers)} {
		if v, ok := s["publish_per_second_"+strings.ReplaceAll(key, " ", "_")]; ok {
			fmt.Fprintf(tw, "client publish, %s\t%.0f events/s\t\t\t\t≥ 20000 events/s\n", key, v)
		}
	}
	if v, ok := s["http_per_second"]; ok {
		fmt.Fprintf(tw, "end to end, Go client (16 goroutines)\t%.0f events/s\t\t\t%.3f (worker + database)\t\n", s["http_go_client_per_second"], s["http_go_client_cpu_ms"])
		fmt.Fprintf(tw, "end to end, POST /v1/events (16 clients)\t%.0f events/s (%.2f × Go client)\t\t\t%.3f (worker + serve + database; serve %.3f)\t≥ 0.80 × Go client\n",
			v, s["http_vs_go_client"], s["http_cpu_ms"], s["http_serve_cpu_ms"])
	}
	if g := r.Growth; g != nil {
		fmt.Fprintf(tw, "growth: %d deliveries, %d attempts (%.0f + %.0f MiB)\tseeded in %.0f s + indexes %.0f s + VACUUM ANALYZE %.0f s\t\t\t\t\n",
			g.Rows, g.Attempts, g.DeliveriesMiB, g.AttemptsMiB, g.SeedSeconds, g.IndexSeconds, g.AnalyzeSeconds)
		for _, c := range g.Claim {
			fmt.Fprintf(tw, "  claim, %d goroutines\t%.0f claims/s, p50 %.2f ms, p99 %.2f ms\t\t\t\t\n", c.Goroutines, c.PerSecond, c.P50MS, c.P99MS)
		}
		fmt.Fprintf(tw, "  sweep tick, %d Failed rows\t%.1f ms (query %.2f ms)\t\t\t\t\n", g.Failed, g.Sweep.MedianMS, g.Sweep.QueryMS)
		for _, p := range g.Console {
			fmt.Fprintf(tw, "  console %s\t%.1f ms (max %.1f, first %.1f)\t\t\t\t≤ 200 ms\n", p.Name, p.MedianMS, p.MaxMS, p.FirstMS)
		}
		a := g.Retention.Alone
		fmt.Fprintf(tw, "  retention pass alone\t%d rows in %.1f s = %.0f rows/s; %d expired = %.1f h, %.0f hourly runs\t\t\t\t\n",
			a.Delivered+a.Exhausted, a.Seconds, a.PerSecond, g.Retention.Expired, g.Retention.BacklogHours, g.Retention.BacklogRuns)
		fmt.Fprintf(tw, "  retention under load\t%.0f rows/s; VACUUM after %.0f s\t\t\t\t\n", s["growth_retention_under_load_rows_per_second"], g.Retention.VacuumSeconds)
		fmt.Fprintf(tw, "  first attempts at %d events/s for %s\tp99 %.1f ms without, %.1f ms during retention (%.2f ×)\t\t\t\t≤ 2 ×\n",
			o.growthRate, o.growthFor, s["growth_p99_ms"], s["growth_p99_retention_ms"], s["growth_p99_retention_vs_without"])
	}
	_ = tw.Flush()
}
