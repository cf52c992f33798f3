package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// sweepResult is the sweep tick's cost at one backlog size.
type sweepResult struct {
	Rows     int       `json:"failed_rows"`
	Due      int       `json:"due_rows"`
	Enqueued int       `json:"enqueued"`
	TicksMS  []float64 `json:"ticks_ms"`
	MedianMS float64   `json:"median_ms"`
	// QueryMS is the median execution time of the sweeper's SELECT alone,
	// by EXPLAIN ANALYZE: the part that could grow with the table.
	QueryMS float64 `json:"query_median_ms"`
	Plan    string  `json:"plan"`
}

// runSweep grows a table of Failed rows through sizes (ascending), with
// exactly batch rows due and the rest due hours from now, and times runs
// sweeper steps (RunOnce) at each size after one warm-up step. Redis is
// emptied and the rows' queued marks cleared before each step, so each
// enqueues the whole batch afresh.
func (e *env) runSweep(ctx context.Context, sizes []int, batch, runs int, logf func(string, ...any)) ([]sweepResult, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	if err := e.createHooks(ctx, 1, 3); err != nil {
		return nil, err
	}
	var hookID, hookName string
	if err := e.db.WithContext(ctx).Raw("SELECT id, name FROM webhooks").Row().Scan(&hookID, &hookName); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	client := asynq.NewClient(e.redis)
	defer client.Close()
	insp := asynq.NewInspector(e.redis)
	defer insp.Close()
	sw := sweeper.New(e.db, client, insp, sweeper.Config{BatchSize: batch, NewTask: tasks.NewSweptRetryTask, TaskID: tasks.RetryTaskID})

	now := time.Now().UTC()
	have := 0
	var out []sweepResult
	for _, size := range sizes {
		due := 0
		if have == 0 {
			due = min(batch, size)
		}
		seedStart := time.Now()
		if err := seedFailed(ctx, conn, hookID, hookName, have, size-have, due, now); err != nil {
			return nil, err
		}
		have = size
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries"); err != nil {
			return nil, err
		}
		logf("sweep: seeded %d Failed rows in %s", size, time.Since(seedStart).Round(time.Millisecond))
		res := sweepResult{Rows: size, Due: min(batch, size)}
		var queries []float64
		for range runs {
			plan, ms, err := explainSweep(ctx, conn, batch)
			if err != nil {
				return nil, err
			}
			res.Plan, queries = plan, append(queries, ms)
		}
		res.QueryMS = median(queries)
		for i := range runs + 1 {
			if err := e.rdb.FlushDB(ctx).Err(); err != nil {
				return nil, err
			}
			// Unmark what the last tick queued, so that each tick takes
			// the whole batch afresh.
			if _, err := conn.Exec(ctx, "UPDATE deliveries SET queued_at = NULL WHERE queued_at IS NOT NULL"); err != nil {
				return nil, err
			}
			start := time.Now()
			r, err := sw.RunOnce(ctx)
			if err != nil {
				return nil, err
			}
			took := time.Since(start)
			res.Enqueued = r.Enqueued
			if i > 0 { // the first tick warms caches
				res.TicksMS = append(res.TicksMS, float64(took)/float64(time.Millisecond))
			}
		}
		res.MedianMS = median(res.TicksMS)
		out = append(out, res)
	}
	return out, nil
}

// seedFailed COPYs n Failed rows numbered from offset, the first due of them
// due already and the others due between one and five hours after now.
func seedFailed(ctx context.Context, conn *pgx.Conn, hookID, hookName string, offset, n, due int, now time.Time) error {
	payload := []byte(`{"doctype":"Sales Order","name":"SO-0000001","grand_total":1500}`)
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		k := offset + i
		next := now.Add(time.Hour + time.Duration(k%14400)*time.Second)
		if i < due {
			next = now.Add(-time.Duration(due-i) * time.Second)
		}
		i++
		return []any{
			uuid.Must(uuid.NewV7()).String(), hookID, hookName, fmt.Sprintf("ev-%d", k), "Sales Order",
			fmt.Sprintf("SO-%07d", k), "on_submit", "POST", "http://127.0.0.1:9/h", `{"Content-Type":"application/json"}`,
			payload, "Failed", 1, 3, next, "receiver answered 503 Service Unavailable", now, now,
		}, nil
	})
	_, err := conn.CopyFrom(ctx, pgx.Identifier{"deliveries"}, []string{
		"id", "webhook_id", "webhook_name", "event_id", "doc_type", "doc_name", "doc_event", "method", "url", "headers",
		"payload", "status", "attempts", "max_retries", "next_retry", "last_error", "created_at", "updated_at",
	}, src)
	if err != nil {
		return fmt.Errorf("copy %d rows: %w", n, err)
	}
	return nil
}

// explainSweep runs the sweeper's query (the same text as in package
// sweeper) under EXPLAIN ANALYZE: the plan, to check it walks the
// deliveries_due index, and the execution time.
func explainSweep(ctx context.Context, conn *pgx.Conn, batch int) (string, float64, error) {
	// The step's query as package sweeper runs it, one webhook, nothing
	// queued, no queue full: the named parameters become positional.
	q := strings.NewReplacer(
		"CAST(@full AS text[])", "'{}'::text[]", "CAST(@spent AS text[])", "'{}'::text[]",
		"@now", "$1", "@stale", "$1", "@probe_max_before", "$1", "@probe_min_before", "$1", "@failing", strconv.Itoa(models.FailingAfter),
		"@per", "$2", "@tick_seconds", "4", "@batch", "$2",
	).Replace(sweeper.SelectDuePostgres)
	// As the sweeper runs it: without JIT (sweeper.selectRows).
	if _, err := conn.Exec(ctx, "SET jit = off"); err != nil {
		return "", 0, err
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS OFF) "+q, time.Now().UTC(), batch)
	if err != nil {
		return "", 0, err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", 0, err
	}
	var ms float64
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
		if v, ok := strings.CutPrefix(lines[i], "Execution Time: "); ok {
			ms, _ = strconv.ParseFloat(strings.TrimSuffix(v, " ms"), 64)
		}
	}
	return strings.Join(lines, " | "), ms, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
