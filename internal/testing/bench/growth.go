package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/internal/engine/retention"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/tasks"
)

// growthResult is the growth scenario (issue 28, part 4): Homing's hot and
// cold paths on a deliveries table of Rows rows, and what a retention pass
// costs the hot path while it runs.
type growthResult struct {
	Rows     int   `json:"rows"`
	Attempts int64 `json:"attempt_rows"`
	// Failed and Due are the Failed rows seeded and how many of them are due.
	Failed int `json:"failed_rows"`
	Due    int `json:"due_rows"`
	// SeedSeconds is the two COPYs, IndexSeconds rebuilding the secondary
	// indexes dropped for them, AnalyzeSeconds the VACUUM ANALYZE after.
	SeedSeconds    float64 `json:"seed_seconds"`
	IndexSeconds   float64 `json:"index_seconds"`
	AnalyzeSeconds float64 `json:"vacuum_analyze_seconds"`
	// DeliveriesMiB and AttemptsMiB are pg_total_relation_size (indexes
	// included) after seeding.
	DeliveriesMiB float64         `json:"deliveries_mib"`
	AttemptsMiB   float64         `json:"attempts_mib"`
	Claim         []claimResult   `json:"claim"`
	Sweep         sweepResult     `json:"sweep"`
	Console       []pageResult    `json:"console"`
	Retention     retentionResult `json:"retention"`
	// Latency pairs first-attempt latency without (Retention false) and
	// with retention passes running back to back.
	Latency []growthLatency `json:"latency"`
}

// claimResult is the batched claim (internal/engine/dispatch/storage's Claim on
// PostgreSQL: concurrent claims share one UPDATE … FROM unnest) of due
// Failed rows from Goroutines goroutines.
type claimResult struct {
	Goroutines int     `json:"goroutines"`
	Claims     int     `json:"claims"`
	PerSecond  float64 `json:"per_second"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
}

// pageResult is one console page's time, median of growthPageRuns GETs
// after one warm-up, and the warm-up's own time.
type pageResult struct {
	Name     string  `json:"name"`
	Path     string  `json:"path"`
	MedianMS float64 `json:"median_ms"`
	MaxMS    float64 `json:"max_ms"`
	FirstMS  float64 `json:"first_ms"`
}

// retentionPass is what one retention.RunOnce did.
type retentionPass struct {
	Delivered int64   `json:"delivered"`
	Exhausted int64   `json:"exhausted"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"rows_per_second"`
	// Cut is set when the pass was cancelled at the end of a latency
	// window (its counts are what it deleted until then).
	Cut bool `json:"cut,omitempty"`
}

// retentionResult is retention at the default configuration (30 days of
// Delivered, 90 of Exhausted, 500 rows a statement, at most 200 statements
// a status per run, one run an hour).
type retentionResult struct {
	// Expired is how many rows the default retention would delete now.
	Expired int64 `json:"expired_rows"`
	// Alone is one pass with nothing else running.
	Alone retentionPass `json:"alone"`
	// UnderLoad are the passes run back to back during the latency windows.
	UnderLoad []retentionPass `json:"under_load"`
	// BacklogHours is Expired at Alone's rate; BacklogRuns is how many
	// hourly runs clear it when each deletes what Alone deleted.
	BacklogHours float64 `json:"backlog_hours_at_alone_rate"`
	BacklogRuns  float64 `json:"backlog_hourly_runs"`
	// CapacityPerDay is 24 runs of what Alone deleted: the most a day's
	// retention deletes at the default configuration.
	CapacityPerDay float64 `json:"capacity_rows_per_day"`
	// VacuumSeconds is VACUUM of both tables after every pass: the work
	// autovacuum would do for the deleted rows.
	VacuumSeconds float64 `json:"vacuum_seconds"`
}

type growthLatency struct {
	Retention bool `json:"retention"`
	latencyResult
}

// growthPageRuns GETs are timed per console page.
const growthPageRuns = 5

// growthSpan is how far back the seeded deliveries go.
const growthSpan = 60 * 24 * time.Hour

// growthHook is a webhook the seeded deliveries belong to.
type growthHook struct {
	id, name, tenant, docType, url string
}

// growthSeed generates the seeded rows from their number k alone, so that
// the deliveries' and the attempts' COPYs, running at once, agree. Rows are
// created at even steps over growthSpan, oldest first, so the table's
// physical order follows created_at as a running system's does. Of the
// newest 5 % (the last three days), every failedEvery-th row is Failed,
// alternately due (in the last ten minutes) and not (in one to five
// hours); 2 % of the rest are Exhausted (four attempts) and the others
// Delivered (one attempt; every tenth after a 503).
type growthSeed struct {
	n           int
	now         time.Time
	hooks       []growthHook
	recent      int
	failedEvery int
}

func newGrowthSeed(n int, now time.Time, hooks []growthHook) growthSeed {
	recent := max(n/20, 1)
	failed := max(min(5000, recent/2), 1)
	return growthSeed{n: n, now: now, hooks: hooks, recent: recent, failedEvery: max(recent/failed, 1)}
}

func (s growthSeed) created(k int) time.Time {
	return s.now.Add(-growthSpan + time.Duration(float64(growthSpan)*float64(k)/float64(s.n))).Truncate(time.Microsecond)
}

// failed reports whether row k is Failed, and whether it is due.
func (s growthSeed) failed(k int) (failed, due bool) {
	j := k - (s.n - s.recent)
	if j < 0 || j%s.failedEvery != 0 {
		return false, false
	}
	return true, (j/s.failedEvery)%2 == 0
}

func (s growthSeed) status(k int) string {
	if f, _ := s.failed(k); f {
		return "Failed"
	}
	if k%50 == 1 {
		return "Exhausted"
	}
	return "Delivered"
}

func (s growthSeed) attempts(k int) int {
	switch s.status(k) {
	case "Exhausted":
		return 4
	case "Failed":
		return 1 + k%2
	}
	if k%10 == 3 {
		return 2
	}
	return 1
}

// id is a UUIDv7 of the row's creation time (as Homing's ids are), unique
// by k.
func (s growthSeed) id(k int) string {
	var b [16]byte
	ms := uint64(s.created(k).UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x70
	binary.BigEndian.PutUint64(b[8:], uint64(k)|0x8000000000000000)
	return uuid.UUID(b).String()
}

var growthDeliveryColumns = []string{
	"id", "tenant", "webhook_id", "webhook_name", "event_id", "doc_type", "doc_name", "doc_event", "method", "url", "headers",
	"payload", "status", "attempts", "max_retries", "next_retry", "last_status_code", "last_error", "last_response",
	"created_at", "updated_at",
}

// delivery is row k of deliveries, in growthDeliveryColumns' order, with a
// payload of about 300 bytes.
func (s growthSeed) delivery(k int) []any {
	h := s.hooks[k%len(s.hooks)]
	created := s.created(k)
	status := s.status(k)
	doc := fmt.Sprintf("%s-%07d", strings.ToUpper(h.docType[:2]), k%1000000)
	payload := fmt.Sprintf(`{"doctype":%q,"name":%q,"customer":"Acme Corporation","status":"To Deliver and Bill","currency":"EUR",`+
		`"grand_total":%d,"posting_date":"2025-01-15","items":[{"item_code":"WIDGET-1","qty":2,"rate":250},{"item_code":"GADGET-7","qty":1,"rate":1000}],"owner":"sales@example.com"}`,
		h.docType, doc, 1500+k%10000)
	var next *time.Time
	code, lastErr, lastResp := 200, "", `{"ok":true}`
	if status != "Delivered" {
		code, lastErr, lastResp = 503, "receiver answered 503 Service Unavailable", ""
	}
	if f, due := s.failed(k); f {
		t := s.now.Add(time.Hour + time.Duration(k%14400)*time.Second)
		if due {
			t = s.now.Add(-time.Duration(k%600) * time.Second)
		}
		next = &t
	}
	return []any{
		s.id(k), h.tenant, h.id, h.name, fmt.Sprintf("ev-%09d", k), h.docType, doc, "on_submit", "POST", h.url,
		`{"Content-Type":"application/json"}`, []byte(payload), status, s.attempts(k), 3, next, code, lastErr, lastResp,
		created, created.Add(time.Duration(s.attempts(k)-1) * 5 * time.Minute),
	}
}

var growthAttemptColumns = []string{
	"delivery_id", "tenant", "attempt", "at", "method", "url", "request_headers", "status_code", "duration_ms", "class", "error", "response",
}

// attemptRows are row k's attempts: all but the last answered 503, the
// last as the row's status says.
func (s growthSeed) attemptRows(k int) [][]any {
	h := s.hooks[k%len(s.hooks)]
	id, n, status := s.id(k), s.attempts(k), s.status(k)
	headers := `{"Content-Type":"application/json","Webhook-Id":"` + id + `"}`
	out := make([][]any, n)
	for a := 1; a <= n; a++ {
		code, class, errText, resp := 503, "5xx", "receiver answered 503 Service Unavailable", "Service Unavailable"
		if a == n && status == "Delivered" {
			code, class, errText, resp = 200, "2xx", "", `{"ok":true}`
		}
		out[a-1] = []any{id, h.tenant, a, s.created(k).Add(time.Duration(a-1) * 5 * time.Minute), "POST", h.url, headers,
			code, int64(40 + k%50), class, errText, resp}
	}
	return out
}

// runGrowth runs the growth scenario on rows deliveries.
func (e *env) runGrowth(ctx context.Context, rows, rate int, window time.Duration, runs, concurrency int, logf func(string, ...any)) (growthResult, error) {
	res := growthResult{Rows: rows}
	if err := e.reset(ctx); err != nil {
		return res, err
	}
	hooks, err := e.growthHooks(ctx)
	if err != nil {
		return res, err
	}
	seed := newGrowthSeed(rows, time.Now().UTC(), hooks)
	if err := e.seedGrowth(ctx, seed, &res, logf); err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}

	client := asynq.NewClient(e.redis)
	defer client.Close()
	insp := asynq.NewInspector(e.redis)
	defer insp.Close()
	if res.Sweep, err = e.growthSweep(ctx, client, insp, runs); err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	logf("growth: sweep tick median %.1f ms %v, query %.2f ms", res.Sweep.MedianMS, res.Sweep.TicksMS, res.Sweep.QueryMS)
	if res.Claim, err = e.growthClaim(ctx, seed.now); err != nil {
		return res, fmt.Errorf("claim: %w", err)
	}
	for _, c := range res.Claim {
		logf("growth: claim from %d goroutines: %d at %.0f/s, p50 %.2f ms, p99 %.2f ms", c.Goroutines, c.Claims, c.PerSecond, c.P50MS, c.P99MS)
	}
	// The sweep's retry tasks must not reach the worker of the latency runs.
	if err := e.rdb.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	if res.Console, err = e.growthConsole(ctx, seed); err != nil {
		return res, fmt.Errorf("console: %w", err)
	}
	for _, p := range res.Console {
		logf("growth: console %s: median %.1f ms, max %.1f ms, first %.1f ms", p.Name, p.MedianMS, p.MaxMS, p.FirstMS)
	}

	ret := retention.New(e.db, retention.Config{})
	if err := e.db.WithContext(ctx).Raw(`SELECT
		(SELECT count(*) FROM deliveries WHERE status = 'Delivered' AND created_at < ?) +
		(SELECT count(*) FROM deliveries WHERE status = 'Exhausted' AND created_at < ?)`,
		seed.now.Add(-retention.DefaultDelivered), seed.now.Add(-retention.DefaultExhausted)).Row().Scan(&res.Retention.Expired); err != nil {
		return res, err
	}
	res.Retention.Alone, err = retentionRun(ctx, ret)
	if err != nil {
		return res, fmt.Errorf("retention: %w", err)
	}
	a := res.Retention.Alone
	logf("growth: %d rows expired; one retention pass alone: %d Delivered + %d Exhausted in %.1fs = %.0f rows/s",
		res.Retention.Expired, a.Delivered, a.Exhausted, a.Seconds, a.PerSecond)
	if a.PerSecond > 0 {
		res.Retention.BacklogHours = float64(res.Retention.Expired) / a.PerSecond / 3600
	}
	if perRun := a.Delivered + a.Exhausted; perRun > 0 {
		res.Retention.BacklogRuns = float64(res.Retention.Expired) / float64(perRun)
		res.Retention.CapacityPerDay = 24 * float64(perRun)
	}

	for i := range runs {
		for _, during := range []bool{false, true} {
			var mu sync.Mutex
			var passes []retentionPass
			var alongside func(context.Context)
			if during {
				alongside = func(ctx context.Context) {
					for ctx.Err() == nil {
						p, err := retentionRun(ctx, ret)
						if err != nil && !errors.Is(err, context.Canceled) {
							logf("growth: retention pass: %v", err)
							return
						}
						mu.Lock()
						passes = append(passes, p)
						mu.Unlock()
					}
				}
			}
			if err := e.rdb.FlushDB(ctx).Err(); err != nil {
				return res, err
			}
			l, err := e.measureLatency(ctx, rate, window, concurrency, alongside)
			if err != nil {
				return res, fmt.Errorf("latency (retention %v): %w", during, err)
			}
			res.Latency = append(res.Latency, growthLatency{Retention: during, latencyResult: l})
			res.Retention.UnderLoad = append(res.Retention.UnderLoad, passes...)
			var deleted int64
			var secs float64
			for _, p := range passes {
				deleted, secs = deleted+p.Delivered+p.Exhausted, secs+p.Seconds
			}
			logf("growth: latency run %d, retention %v: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms at %.0f/s; %d retention passes deleted %d rows in %.1fs",
				i+1, during, l.P50MS, l.P95MS, l.P99MS, l.MaxMS, l.Rate, len(passes), deleted, secs)
			if during && deleted == 0 {
				logf("growth: no rows left to expire: the latency run with retention measured nothing more than the one without (raise -growth-rows)")
			}
		}
	}

	start := time.Now()
	if err := e.db.WithContext(ctx).Exec("VACUUM deliveries, delivery_attempts").Error; err != nil {
		return res, err
	}
	res.Retention.VacuumSeconds = time.Since(start).Seconds()
	logf("growth: VACUUM after the passes: %.1fs", res.Retention.VacuumSeconds)
	return res, nil
}

// retentionRun times one retention pass. A pass cut by ctx reports what it
// deleted until then, with Cut set and ctx's error.
func retentionRun(ctx context.Context, ret *retention.Retention) (retentionPass, error) {
	start := time.Now()
	r, err := ret.RunOnce(ctx)
	p := retentionPass{Delivered: r.Delivered, Exhausted: r.Exhausted, Seconds: time.Since(start).Seconds()}
	if p.Seconds > 0 {
		p.PerSecond = float64(p.Delivered+p.Exhausted) / p.Seconds
	}
	if err != nil {
		p.Cut = ctx.Err() != nil
		return p, err
	}
	return p, nil
}

// growthHooks creates four tenants' webhooks at the receiver: seven in
// default (bench-0 on Sales Order on_submit, which the latency runs' events
// match; the others on other doctypes) and one in each of three others.
func (e *env) growthHooks(ctx context.Context) ([]growthHook, error) {
	for _, t := range []string{"acme", "globex", "initech"} {
		if err := e.db.WithContext(ctx).Exec("INSERT INTO tenants (name, created_at, updated_at) VALUES (?, now(), now()) ON CONFLICT DO NOTHING", t).Error; err != nil {
			return nil, fmt.Errorf("create tenant %s: %w", t, err)
		}
	}
	svc := webhook.New(e.db, &secretbox.Box{}, nil, webhook.Defaults{MaxRetries: 3, Timeout: 5 * time.Second}, nil)
	specs := []growthHook{
		{name: "bench-0", tenant: "default", docType: "Sales Order"},
		{name: "invoices", tenant: "default", docType: "Sales Invoice"},
		{name: "customers", tenant: "default", docType: "Customer"},
		{name: "notes", tenant: "default", docType: "Delivery Note"},
		{name: "payments", tenant: "default", docType: "Payment Entry"},
		{name: "items", tenant: "default", docType: "Item"},
		{name: "purchases", tenant: "default", docType: "Purchase Order"},
		{name: "orders", tenant: "acme", docType: "Sales Order"},
		{name: "orders", tenant: "globex", docType: "Sales Order"},
		{name: "orders", tenant: "initech", docType: "Sales Order"},
	}
	for i := range specs {
		h := &specs[i]
		h.url = e.recv.url + "/h/" + strconv.Itoa(i)
		ev, retries := "on_submit", 3
		w, err := svc.Create(ctx, h.tenant, webhook.Input{Name: &h.name, DocType: &h.docType, Event: &ev, URL: &h.url, MaxRetries: &retries})
		if err != nil {
			return nil, fmt.Errorf("create webhook %s/%s: %w", h.tenant, h.name, err)
		}
		h.id = w.ID
	}
	return specs, nil
}

// seedGrowth COPYs the seed's deliveries and attempts (two connections at
// once) into tables stripped of their secondary indexes, rebuilds those
// indexes from their own definitions, and runs VACUUM ANALYZE. The primary
// and unique keys stay throughout. The attempts' COPY runs with
// session_replication_role = replica: its foreign key to deliveries is not
// checked row by row (the seed makes every attempt's delivery).
func (e *env) seedGrowth(ctx context.Context, s growthSeed, res *growthResult, logf func(string, ...any)) error {
	var defs []struct{ Name, Def string }
	if err := e.db.WithContext(ctx).Raw(`SELECT indexname AS name, indexdef AS def FROM pg_indexes
		WHERE tablename IN ('deliveries', 'delivery_attempts')
			AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid IN ('deliveries'::regclass, 'delivery_attempts'::regclass))
		ORDER BY indexname`).Scan(&defs).Error; err != nil {
		return err
	}
	for _, d := range defs {
		if err := e.db.WithContext(ctx).Exec("DROP INDEX " + d.Name).Error; err != nil {
			return err
		}
	}
	start := time.Now()
	errs := make(chan error, 2)
	var attempts int64
	go func() {
		errs <- copyRows(ctx, e.dsn, "", "deliveries", growthDeliveryColumns, s.n, func(k int, emit func([]any)) { emit(s.delivery(k)) },
			func(k int) {
				if k > 0 && k%1000000 == 0 {
					logf("growth: %d deliveries copied (%s)", k, time.Since(start).Round(time.Second))
				}
			})
	}()
	go func() {
		errs <- copyRows(ctx, e.dsn, "SET session_replication_role = replica", "delivery_attempts", growthAttemptColumns, s.n,
			func(k int, emit func([]any)) {
				for _, a := range s.attemptRows(k) {
					attempts++
					emit(a)
				}
			}, nil)
	}()
	if err := errors.Join(<-errs, <-errs); err != nil {
		return err
	}
	res.Attempts = attempts
	res.SeedSeconds = time.Since(start).Seconds()
	logf("growth: copied %d deliveries and %d attempts in %.0fs", s.n, attempts, res.SeedSeconds)

	start = time.Now()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '1GB'"); err != nil {
		return err
	}
	for _, d := range defs {
		t := time.Now()
		if _, err := conn.Exec(ctx, d.Def); err != nil {
			return fmt.Errorf("%s: %w", d.Def, err)
		}
		logf("growth: index %s in %.1fs", d.Name, time.Since(t).Seconds())
	}
	res.IndexSeconds = time.Since(start).Seconds()
	start = time.Now()
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries, delivery_attempts"); err != nil {
		return err
	}
	res.AnalyzeSeconds = time.Since(start).Seconds()
	var dBytes, aBytes int64
	if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size('deliveries'), pg_total_relation_size('delivery_attempts')").Scan(&dBytes, &aBytes); err != nil {
		return err
	}
	res.DeliveriesMiB, res.AttemptsMiB = float64(dBytes)/(1<<20), float64(aBytes)/(1<<20)
	for k := s.n - s.recent; k < s.n; k++ {
		if f, due := s.failed(k); f {
			res.Failed++
			if due {
				res.Due++
			}
		}
	}
	logf("growth: indexes %.0fs, VACUUM ANALYZE %.0fs; deliveries %.0f MiB, attempts %.0f MiB; %d Failed, %d due",
		res.IndexSeconds, res.AnalyzeSeconds, res.DeliveriesMiB, res.AttemptsMiB, res.Failed, res.Due)
	return nil
}

// copyRows COPYs the rows gen emits for 0..n-1 into table on a connection
// of its own (prepared by setup when not empty).
func copyRows(ctx context.Context, dsn, setup, table string, columns []string, n int, gen func(k int, emit func([]any)), progress func(k int)) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if setup != "" {
		if _, err := conn.Exec(ctx, setup); err != nil {
			return err
		}
	}
	var pending [][]any
	k := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		for len(pending) == 0 {
			if k == n {
				return nil, nil
			}
			if progress != nil {
				progress(k)
			}
			gen(k, func(row []any) { pending = append(pending, row) })
			k++
		}
		row := pending[0]
		pending = pending[1:]
		return row, nil
	})
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, columns, src); err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	return nil
}

// growthSweep times runs sweeper steps (RunOnce, the default
// configuration) after a warm-up, with Redis emptied and the queued marks
// cleared before each, as the sweep scenario does.
func (e *env) growthSweep(ctx context.Context, client *asynq.Client, insp *asynq.Inspector, runs int) (sweepResult, error) {
	sw := sweeper.New(e.db, client, insp, sweeper.Config{NewTask: tasks.NewSweptRetryTask, TaskID: tasks.RetryTaskID})
	var res sweepResult
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	var queries []float64
	for range runs {
		plan, ms, err := explainSweep(ctx, conn, sweeper.DefaultBatchSize)
		if err != nil {
			return res, err
		}
		res.Plan, queries = plan, append(queries, ms)
	}
	res.QueryMS = median(queries)
	for i := range runs + 1 {
		if err := e.rdb.FlushDB(ctx).Err(); err != nil {
			return res, err
		}
		// Served by deliveries_due (status = 'Failed').
		if _, err := conn.Exec(ctx, "UPDATE deliveries SET queued_at = NULL WHERE status = 'Failed' AND queued_at IS NOT NULL"); err != nil {
			return res, err
		}
		start := time.Now()
		r, err := sw.RunOnce(ctx)
		if err != nil {
			return res, err
		}
		took := time.Since(start)
		res.Enqueued = r.Enqueued
		if i > 0 {
			res.TicksMS = append(res.TicksMS, float64(took)/float64(time.Millisecond))
		}
	}
	res.MedianMS = median(res.TicksMS)
	return res, nil
}

// growthClaim claims the due Failed rows for a retry through the store the
// worker uses: the first third one at a time (each claim its own
// statement), the rest from 32 goroutines (claims sharing statements).
func (e *env) growthClaim(ctx context.Context, now time.Time) ([]claimResult, error) {
	if err := e.db.WithContext(ctx).Exec("UPDATE deliveries SET queued_at = NULL WHERE status = 'Failed' AND queued_at IS NOT NULL").Error; err != nil {
		return nil, err
	}
	var ids []string
	// Served by deliveries_due.
	if err := e.db.WithContext(ctx).Raw("SELECT id FROM deliveries WHERE status = 'Failed' AND next_retry <= ? ORDER BY next_retry", now).
		Scan(&ids).Error; err != nil {
		return nil, err
	}
	if len(ids) < 3 {
		return nil, fmt.Errorf("%d due rows to claim, want at least 3: raise -growth-rows", len(ids))
	}
	st := storage.For(e.db)
	var out []claimResult
	for _, part := range []struct {
		goroutines int
		ids        []string
	}{{1, ids[:len(ids)/3]}, {32, ids[len(ids)/3:]}} {
		next := make(chan string)
		var (
			mu   sync.Mutex
			lat  []time.Duration
			errs []error
			wg   sync.WaitGroup
		)
		for range part.goroutines {
			wg.Go(func() {
				for id := range next {
					t := time.Now()
					c, err := st.Claim(ctx, storage.ClaimIn{ID: id, Mode: storage.Retry, Now: time.Now().UTC()})
					took := time.Since(t)
					if err == nil && !c.Claimed {
						err = fmt.Errorf("delivery %s was not claimed (%s, next_retry %v)", id, c.Row.Status, c.Row.NextRetry)
					}
					mu.Lock()
					lat = append(lat, took)
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			})
		}
		start := time.Now()
		for _, id := range part.ids {
			next <- id
		}
		close(next)
		wg.Wait()
		elapsed := time.Since(start)
		if len(errs) > 0 {
			return nil, fmt.Errorf("%d of %d claims failed, first: %w", len(errs), len(part.ids), errs[0])
		}
		slices.Sort(lat)
		q := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
		}
		out = append(out, claimResult{Goroutines: part.goroutines, Claims: len(lat), PerSecond: float64(len(lat)) / elapsed.Seconds(), P50MS: q(0.5), P99MS: q(0.99)})
	}
	return out, nil
}

// growthConsole times the console's pages, served by homing serve, for an
// operator's session in the default tenant.
func (e *env) growthConsole(ctx context.Context, s growthSeed) ([]pageResult, error) {
	_, tok, err := token.New(e.db, nil, nil).Create(ctx, "growth", token.ScopeAdmin, "")
	if err != nil {
		return nil, err
	}
	serve, err := startProcess("serve", e.binDir, filepath.Join(e.binDir, "homing"), []string{"serve"},
		e.homingEnv("HOMING_API_ADDR=127.0.0.1:0"), "api started")
	if err != nil {
		return nil, err
	}
	defer func() { _ = serve.stop() }()
	addr, err := serve.logValue("api started", "addr")
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	defer hc.CloseIdleConnections()
	get := func(path string) (time.Duration, string, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: tok})
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		took := time.Since(start)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return took, string(body), err
	}
	// The first view of all: it rolls up the day's closed hours
	// (inspect.rollHours), once; it is reported as a page of its own.
	took, first, err := get("/console/deliveries")
	if err != nil {
		return nil, err
	}
	cold := float64(took) / float64(time.Millisecond)
	out := []pageResult{{Name: "deliveries_first_view", Path: "/console/deliveries", MedianMS: cold, MaxMS: cold, FirstMS: cold}}
	next := ""
	if i := strings.Index(first, `href="/console/deliveries?cursor=`); i >= 0 {
		next = strings.ReplaceAll(first[i+len(`href="`):i+strings.Index(first[i:], `" id=`)], "&amp;", "&")
	}
	// A day 40 days back: most of its rows expired, none deleted yet.
	day := s.now.Add(-40 * 24 * time.Hour)
	// The middle row belongs to bench-0 (k % 10 == 0).
	mid := s.n / 2 / 10 * 10
	pages := []struct{ name, path string }{
		{"overview", "/console/"},
		{"deliveries", "/console/deliveries"},
		{"deliveries_page2", next},
		{"deliveries_status", "/console/deliveries?status=Exhausted"},
		{"deliveries_webhook", "/console/deliveries?webhook=bench-0"},
		{"deliveries_webhook_status", "/console/deliveries?webhook=bench-0&status=Failed"},
		{"deliveries_doc", "/console/deliveries?doc_type=Sales+Order&doc_name=" + s.delivery(mid)[6].(string)},
		{"deliveries_event", "/console/deliveries?event_id=" + s.delivery(mid)[4].(string)},
		{"deliveries_since_until", "/console/deliveries?since=" + url.QueryEscape(day.Format(time.RFC3339)) +
			"&until=" + url.QueryEscape(day.Add(time.Hour).Format(time.RFC3339))},
		{"delivery", "/console/deliveries/" + s.id(mid)},
		{"webhooks", "/console/webhooks"},
		{"webhook", "/console/webhooks/bench-0"},
	}
	for _, p := range pages {
		if p.path == "" {
			return nil, errors.New("the deliveries page has no link to a second page")
		}
		var times []float64
		var warm float64
		for i := range growthPageRuns + 1 {
			took, body, err := get(p.path)
			if err != nil {
				return nil, fmt.Errorf("%s: %w\n%.500s", p.name, err, body)
			}
			if i > 0 {
				times = append(times, float64(took)/float64(time.Millisecond))
			} else {
				warm = float64(took) / float64(time.Millisecond)
			}
		}
		out = append(out, pageResult{Name: p.name, Path: p.path, MedianMS: median(times), MaxMS: slices.Max(times), FirstMS: warm})
	}
	return out, nil
}
