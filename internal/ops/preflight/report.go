package preflight

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/secretbox"
)

// Report is what a running worker says about its secrets.key, kept in
// Redis while it runs (Reporter): homing stats, run from a shell whose
// environment says nothing of the workers', judges by it (WorkerSecrets).
type Report struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Key is the fingerprint of the worker's secrets.key
	// (secretbox.Box.Fingerprint), "" when it has none.
	Key string `json:"key"`
	// Webhook is a signed webhook whose secret the worker's key did not
	// open, Error why, and Malformed whether no key could (the stored text
	// is not a sealed secret). All empty when the key opened the one it
	// tried, or it has no key, or no webhook is signed.
	Webhook   string `json:"webhook,omitempty"`
	Error     string `json:"error,omitempty"`
	Malformed bool   `json:"malformed,omitempty"`
}

// name is how a problem names the worker: its host and pid, as asynqmon
// lists it.
func (r Report) name() string { return fmt.Sprintf("%s (pid %d)", r.Host, r.PID) }

// reportKey is the Redis key of the report of the worker host:pid. The hash
// tag keeps every worker's report in one slot of a Redis Cluster.
func reportKey(host string, pid int) string {
	return "{homing:workers}:" + host + ":" + strconv.Itoa(pid)
}

// ReportInterval is how often a worker writes its report again: the check
// is one query (a scan of webhooks that stops at the first signed one), so
// a webhook sealed with another key shows in homing stats within this.
const ReportInterval = 10 * time.Second

// reportTTL is how long a report outlives its worker's last write: a worker
// that died without deleting it (SIGKILL) is gone from asynq's server list
// within seconds anyway, and only listed workers are asked.
const reportTTL = 3 * ReportInterval

// Reporter keeps this worker's Report in Redis while it runs: written at
// Start, again every ReportInterval (the webhooks change, the key does
// not), and deleted at Stop. process.Worker starts it before the asynq
// server and stops it after, so a listed worker has its report.
type Reporter struct {
	rdb redis.UniversalClient
	db  *gorm.DB
	box *secretbox.Box
	log *slog.Logger
	// host and pid are the worker's identity in asynq's server list.
	host string
	pid  int

	mu   sync.Mutex
	last Report // what the last check found, kept while the database is away
	stop context.CancelFunc
	done chan struct{}
}

// NewReporter reports, over opt, what box (the worker's secrets.key) makes
// of db's signed webhooks. It reports nothing (Start and Stop do nothing)
// when opt is not a go-redis client.
func NewReporter(opt asynq.RedisConnOpt, db *gorm.DB, box *secretbox.Box, log *slog.Logger) *Reporter {
	rdb, _ := redisClient(opt)
	// asynq's heartbeat names a server by the same two.
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return &Reporter{rdb: rdb, db: db, box: box, log: cmp.Or(log, slog.New(slog.DiscardHandler)), host: host, pid: os.Getpid(),
		last: Report{Host: host, PID: os.Getpid(), Key: box.Fingerprint()}}
}

// RunOnce checks the key against one signed webhook and writes the report.
// While the database is away the last check's finding is written again.
func (r *Reporter) RunOnce(ctx context.Context) error {
	if r.rdb == nil {
		return nil
	}
	r.mu.Lock()
	rep := r.last
	r.mu.Unlock()
	if w, ok, err := signedWebhook(ctx, r.db); err == nil {
		rep.Webhook, rep.Error, rep.Malformed = "", "", false
		if ok && r.box.HasKey() {
			if _, err := r.box.Open(w.Secret); err != nil {
				rep.Webhook, rep.Error, rep.Malformed = w.Name, err.Error(), errors.Is(err, secretbox.ErrMalformed)
			}
		}
		r.mu.Lock()
		r.last = rep
		r.mu.Unlock()
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if err := r.rdb.Set(ctx, reportKey(r.host, r.pid), b, reportTTL).Err(); err != nil {
		return fmt.Errorf("write the worker's report to Redis: %w", err)
	}
	return nil
}

// Start writes the report and keeps it fresh until Stop. A report that
// cannot be written is a warning, not a reason to stop the worker: only
// homing stats reads it.
func (r *Reporter) Start(ctx context.Context) error {
	if r.rdb == nil {
		return nil
	}
	r.mu.Lock()
	started := r.stop != nil
	r.mu.Unlock()
	if started {
		return errors.New("worker report already started")
	}
	r.write(ctx)
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r.mu.Lock()
	r.stop, r.done = cancel, done
	r.mu.Unlock()
	go r.loop(loopCtx, done)
	return nil
}

// write is RunOnce within ReportInterval, its failure logged.
func (r *Reporter) write(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ReportInterval)
	defer cancel()
	if err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("homing stats cannot tell whether this worker can sign deliveries", "error", err.Error())
	}
}

func (r *Reporter) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(ReportInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			r.write(ctx)
		}
	}
}

// Stop ends the writes and deletes the report, so a worker that stopped
// is not taken for one that runs without reporting.
func (r *Reporter) Stop(ctx context.Context) error {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop = nil
	r.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop worker report: %w", ctx.Err())
	}
	var delErr error
	if err := r.rdb.Del(ctx, reportKey(r.host, r.pid)).Err(); err != nil {
		delErr = fmt.Errorf("delete the worker's report (it expires within %s): %w", reportTTL, err)
	}
	return errors.Join(delErr, r.rdb.Close())
}

// Workers are the running workers (asynq's server list) with their
// reports; Reported is false for a worker that has written none (a Homing
// older than the reports, or one stopping).
func Workers(ctx context.Context, opt asynq.RedisConnOpt) ([]WorkerReport, error) {
	rdb, ok := redisClient(opt)
	if !ok {
		return nil, errors.New("redis connection is not a go-redis client")
	}
	defer func() { _ = rdb.Close() }()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	servers, err := insp.Servers()
	if err != nil {
		return nil, fmt.Errorf("list the running workers: %w", err)
	}
	seen := map[string]bool{}
	var out []WorkerReport
	for _, s := range servers {
		key := reportKey(s.Host, s.PID)
		if seen[key] {
			continue // one process, one report
		}
		seen[key] = true
		wr := WorkerReport{Report: Report{Host: s.Host, PID: s.PID}}
		b, err := rdb.Get(ctx, key).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return nil, fmt.Errorf("read the report of worker %s: %w", wr.name(), err)
		default:
			if err := json.Unmarshal(b, &wr.Report); err != nil {
				return nil, fmt.Errorf("read the report of worker %s: %w", wr.name(), err)
			}
			wr.Reported = true
		}
		out = append(out, wr)
	}
	slices.SortFunc(out, func(a, b WorkerReport) int { return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID)) })
	return out, nil
}

// WorkerReport is a running worker and what it reported.
type WorkerReport struct {
	Report
	Reported bool
}

// workerSecrets judges secrets.key by what the running workers report: a
// worker without a key, or whose key does not open a signed webhook's
// secret, sends none of that webhook's deliveries. box is this process's
// key, compared with theirs: a secret sealed with another is one they
// cannot open. Nothing is said while no webhook is signed.
func workerSecrets(ctx context.Context, db *gorm.DB, opt asynq.RedisConnOpt, box *secretbox.Box) []Problem {
	signed, ok, err := signedWebhook(ctx, db)
	if err != nil || !ok {
		return nil
	}
	workers, err := Workers(ctx, opt)
	if err != nil {
		return nil
	}
	if len(workers) == 0 {
		return []Problem{{Check: "secrets_key", Message: fmt.Sprintf(
			"signed webhooks exist (e.g. %q) and no worker is running to say whether its secrets.key opens their secrets (this command does not judge by its own): "+
				"nothing is sent until one runs; start one with the key the secrets were sealed with (make run keeps one; homing worker takes HOMING_SECRETS_KEY)", signed.Name)}}
	}
	var (
		noKey, silent []string
		unopened      = map[Report][]string{} // by webhook, error and key
		keys          = map[string]bool{}
	)
	for _, w := range workers {
		switch {
		case !w.Reported:
			silent = append(silent, w.name())
		case w.Key == "":
			noKey = append(noKey, w.name())
		case w.Webhook != "":
			k := Report{Webhook: w.Webhook, Error: w.Error, Malformed: w.Malformed, Key: w.Key}
			if k.Malformed {
				k.Key = "" // the secret's fault, whatever the key: said once
			}
			unopened[k] = append(unopened[k], w.name())
			keys[w.Key] = true
		default:
			keys[w.Key] = true
		}
	}
	var out []Problem
	if len(noKey) > 0 {
		out = append(out, Problem{Check: "secrets_key", Message: fmt.Sprintf(
			"%s without a secrets.key while signed webhooks exist (e.g. %q): it sends none of their deliveries; restart it with HOMING_SECRETS_KEY set to the key their secrets were sealed with",
			workersRun(noKey), signed.Name)})
	}
	for _, k := range slices.SortedFunc(maps.Keys(unopened), func(a, b Report) int {
		return cmp.Or(cmp.Compare(a.Webhook, b.Webhook), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Error, b.Error))
	}) {
		msg := fmt.Sprintf("the secrets.key (fingerprint %s) of %s does not open the secret of webhook %q (%s): it sends none of its deliveries; restart it with HOMING_SECRETS_KEY set to the key the secrets were sealed with",
			k.Key, workerList(unopened[k]), k.Webhook, k.Error)
		if k.Malformed {
			msg = fmt.Sprintf("the stored secret of webhook %q is malformed (%s): no worker can send its deliveries; give it a new one with homing webhook update --secret", k.Webhook, k.Error)
		}
		out = append(out, Problem{Check: "secrets_key", Message: msg})
	}
	if len(silent) > 0 {
		out = append(out, Problem{Check: "secrets_key", Message: fmt.Sprintf(
			"%s without reporting its secrets.key (a Homing older than this command's, or one stopping): whether it can send signed deliveries is not known", workersRun(silent))})
	}
	if here := box.Fingerprint(); here != "" && len(keys) > 0 && !keys[here] {
		out = append(out, Problem{Check: "secrets_key", Message: fmt.Sprintf(
			"this shell's secrets.key (fingerprint %s) is not the running workers' (%s): a secret sealed here (homing webhook create --secret) is one they cannot open; set HOMING_SECRETS_KEY to theirs (make run prints it)",
			here, strings.Join(slices.Sorted(maps.Keys(keys)), ", "))})
	}
	return out
}

// workerList names workers: "worker h (pid 1)", "workers h (pid 1), h (pid 2)".
func workerList(names []string) string {
	if len(names) == 1 {
		return "worker " + names[0]
	}
	return "workers " + strings.Join(names, ", ")
}

// workersRun is workerList with its verb: "worker h (pid 1) runs".
func workersRun(names []string) string {
	if len(names) == 1 {
		return workerList(names) + " runs"
	}
	return workerList(names) + " run"
}
