// Package handoff carries the delivery outcomes of a process that serves no
// metrics (homing serve, the command line, a publisher's synchronous
// transitions, a worker with metrics.addr empty) to the processes that do,
// so that homing_deliveries_total counts every outcome once across the
// fleet, whichever process caused it (issue 25), and homing_attempts_total
// every attempt (the attempts homing serve makes for workflow_transition,
// those of a worker without metrics), and homing_attempt_duration_seconds
// their durations (DurationsKey: a count per bucket and their sum).
//
// A process without metrics adds its counts to one Redis hash per metric
// (Key, AttemptsKey) with
// HINCRBY, one field per label set: the hash is bounded by the labels'
// cardinality, not by the number of events, and costs nothing while no
// worker drains it. A process with metrics drains the hash at scrape time
// (Drain) and adds what it read to its own counter: the read and the
// delete are one Lua script, so an increment is drained by one process
// only, however many scrape at once.
package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/models"
)

// Key is the Redis hash the counts of homing_deliveries_total wait in,
// beside asynq's keys.
const Key = "homing:outcomes"

// AttemptsKey is the Redis hash the counts of homing_attempts_total wait in.
// Its hash tag is Key, so that on Redis Cluster both hashes are in one slot
// and one script adds to (or drains) both. It is a hash of its own rather
// than fields of Key so that a worker of an older version, which drains
// Key only, never reads an attempt's count as an outcome.
const AttemptsKey = "{" + Key + "}:attempts"

// DurationsKey is the Redis hash the durations of homing_attempt_duration_seconds
// wait in: one field per bucket (its upper bound in seconds, as
// DurationBuckets has it, or "+Inf") counting the attempts that took no
// longer, and SumField, the durations' sum in microseconds. Same hash tag
// as Key, for the same reason as AttemptsKey.
const DurationsKey = "{" + Key + "}:durations"

// SumField is DurationsKey's field for the sum of the durations, in
// microseconds.
const SumField = "sum_us"

// DurationBuckets are homing_attempt_duration_seconds' buckets (upper
// bounds, seconds): the metric's own, and what a handed-off duration is
// counted in.
var DurationBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Timeout bounds one Redis call of Add or Drain: a Redis that does not
// answer costs a command or an API request this long at most, and a scrape
// no more than this.
const Timeout = 2 * time.Second

// Count is n deliveries moved to Status for Reason, of Tenant's Webhook: one
// series of homing_deliveries_total and how much to add to it; or, when
// Class is set (and Status and Reason are not), n attempts of that class:
// one series of homing_attempts_total.
//
// When Bucket is set (and nothing else is), c is n attempt durations in
// that bucket of homing_attempt_duration_seconds (an upper bound of
// DurationBuckets, formatted with strconv's 'g', or "+Inf"), or, for
// SumField, their sum in microseconds.
type Count struct {
	Tenant, Webhook, Status, Reason string
	Class                           string
	Bucket                          string
	N                               int64
}

// IsAttempt reports whether c counts attempts (homing_attempts_total)
// rather than outcomes.
func (c Count) IsAttempt() bool { return c.Class != "" }

// IsDuration reports whether c is part of homing_attempt_duration_seconds.
func (c Count) IsDuration() bool { return c.Bucket != "" }

// bucketOf is the bucket of DurationBuckets a duration is counted in.
func bucketOf(d time.Duration) string {
	for i, b := range DurationBuckets {
		if d.Seconds() <= b {
			return bucketNames[i]
		}
	}
	return "+Inf"
}

// bucketNames are DurationBuckets as fields of DurationsKey.
var bucketNames = func() []string {
	out := make([]string, len(DurationBuckets))
	for i, b := range DurationBuckets {
		out[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	return out
}()

// Handoff adds counts to the hash and drains them. It is safe for
// concurrent use.
//
// Counts are sent as they come, but never more than one batch at a time:
// a caller that finds a batch on its way adds its count to the next one and
// returns, and the caller sending goes on with what gathered meanwhile. So
// a lone caller (a command, an API request) has sent its count when
// Deliveries returns, and a busy worker without metrics makes about one
// Redis call per round trip rather than one per delivery (measured: one
// HINCRBY per attempt cost the throughput bench 8 % of its deliveries a
// second).
type Handoff struct {
	rdb    redis.UniversalClient
	log    *slog.Logger
	labels *Labels // bounds the hashes' fields, as a worker bounds its series

	mu       sync.Mutex
	idle     *sync.Cond // broadcast when sending stops
	pending  map[labels]int64
	flushing bool // a caller or a goroutine is sending pending
}

// labels name one series of homing_deliveries_total, with class set one
// of homing_attempts_total, or with bucket set a bucket (or the sum) of
// homing_attempt_duration_seconds.
type labels struct{ tenant, webhook, status, reason, class, bucket string }

// maxRounds is how many batches one caller sends before it leaves the rest
// to a goroutine, so that an attempt is not held up sending others' counts
// for long.
const maxRounds = 4

// New hands counts off through rdb, the Redis asynq uses; a nil rdb cannot
// hand anything off, and says so in the log each time it is asked to. log
// receives what could not be counted; nil discards it.
func New(rdb redis.UniversalClient, log *slog.Logger) *Handoff {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handoff{rdb: rdb, log: log, pending: map[labels]int64{},
		labels: NewLabels(DefaultMaxTenantLabels, DefaultMaxWebhookLabels, DefaultMaxWebhookLabelsPerTenant)}
	h.idle = sync.NewCond(&h.mu)
	return h
}

// Bound makes the process's metrics.max_tenant_labels,
// metrics.max_webhook_labels and metrics.max_webhook_labels_per_tenant
// bound the labels h hands off (NewLabels), in place of the defaults: the
// hashes' fields then stay as few as the series of the worker that drains
// them, however many webhooks a tenant creates or renames. Call it before
// h is used.
func (h *Handoff) Bound(l *Labels) *Handoff {
	h.labels = l
	return h
}

// errNoRedis is why counts cannot be handed off by a process with no go-redis
// client.
var errNoRedis = errors.New("this process has no Redis to hand them off with (set redis.url; for package transition, Config.Redis)")

// Deliveries hands off n of webhook's deliveries moved to status for reason.
// It is dispatch.Observer's (and so webhook.Observer's) method: the change
// is committed, so a Redis that fails cannot undo it; the loss is logged at
// ERROR with how many were not counted and why, never silent.
func (h *Handoff) Deliveries(tenant, webhook, status, reason string, n int) {
	if n <= 0 {
		return
	}
	tenant, webhook = h.labels.Of(tenant, webhook)
	h.mu.Lock()
	h.pending[labels{tenant: tenant, webhook: webhook, status: status, reason: reason}] += int64(n)
	h.sendLocked()
}

// sendLocked sends what is pending, unless a batch is on its way (which is
// then followed by one with it). The caller holds mu; it is released.
func (h *Handoff) sendLocked() {
	if h.flushing {
		h.mu.Unlock()
		return // the batch on its way is followed by one with this count
	}
	h.flushing = true
	h.mu.Unlock()
	if !h.flush(maxRounds) {
		go h.flush(0)
	}
}

// Attempt hands off the attempt, by class (homing_attempts_total), its
// duration (homing_attempt_duration_seconds, which like the metrics'
// Attempt leaves out an attempt that made no request: class invalid) and
// the status it left its delivery in, in one batch.
func (h *Handoff) Attempt(tenant, webhook, class string, d time.Duration, status, reason string) {
	tenant, webhook = h.labels.Of(tenant, webhook)
	h.mu.Lock()
	if class != "" {
		h.pending[labels{tenant: tenant, webhook: webhook, class: class}]++
	}
	if class != "" && class != string(send.ClassInvalid) {
		h.pending[labels{bucket: bucketOf(d)}]++
		h.pending[labels{bucket: SumField}] += d.Microseconds()
	}
	if status != "" {
		h.pending[labels{tenant: tenant, webhook: webhook, status: status, reason: reason}]++
	}
	if len(h.pending) == 0 {
		h.mu.Unlock()
		return
	}
	h.sendLocked()
}

// Postponed is not handed off: a postponed attempt is no outcome.
func (h *Handoff) Postponed(string) {}

// Flush returns once every count given to Deliveries has been sent (or
// logged as not counted): for a process about to exit.
func (h *Handoff) Flush() {
	h.mu.Lock()
	for h.flushing {
		h.idle.Wait()
	}
	if len(h.pending) == 0 {
		h.mu.Unlock()
		return
	}
	h.flushing = true
	h.mu.Unlock()
	h.flush(0)
}

// flush sends the pending counts, batch after batch, until none is left
// (and then clears flushing) or it has sent rounds batches (0: no bound);
// it reports whether none is left. The caller has set flushing.
func (h *Handoff) flush(rounds int) bool {
	for i := 0; rounds == 0 || i < rounds; i++ {
		h.mu.Lock()
		if len(h.pending) == 0 {
			h.flushing = false
			h.idle.Broadcast()
			h.mu.Unlock()
			return true
		}
		batch := h.pending
		h.pending = make(map[labels]int64, len(batch))
		h.mu.Unlock()
		h.send(batch)
	}
	return false
}

// send adds batch to the hash, or logs what it could not count.
func (h *Handoff) send(batch map[labels]int64) {
	counts := make([]Count, 0, len(batch))
	total := int64(0)
	for l, n := range batch {
		counts = append(counts, Count{Tenant: l.tenant, Webhook: l.webhook, Status: l.status, Reason: l.reason, Class: l.class, Bucket: l.bucket, N: n})
		if l.class == "" && l.bucket == "" {
			total += n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := h.Add(ctx, counts...); err != nil {
		var series, attempts []string
		for _, c := range counts {
			if c.IsDuration() {
				continue // the attempts' counts say how many were lost
			}
			if c.IsAttempt() {
				attempts = append(attempts, fmt.Sprintf("tenant=%s webhook=%s class=%s n=%d", models.TenantOr(c.Tenant), c.Webhook, c.Class, c.N))
			} else {
				series = append(series, fmt.Sprintf("tenant=%s webhook=%s status=%s reason=%s n=%d", models.TenantOr(c.Tenant), c.Webhook, c.Status, c.Reason, c.N))
			}
		}
		slices.Sort(series)
		slices.Sort(attempts)
		h.log.Error("delivery outcomes not counted in homing_deliveries_total (nor attempts in homing_attempts_total): handing them to the workers' metrics through Redis failed (the deliveries and attempts themselves are recorded)",
			"not_counted", total, "series", series, "attempts_not_counted", attempts, "redis", redisAddr(h.rdb), "error", err.Error())
	}
}

// redisAddr names the Redis rdb talks to, for the operator reading a
// failure: the error alone may be a deadline that names no server.
func redisAddr(rdb redis.UniversalClient) string {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return ""
}

// addScript adds field, count pairs to the hashes in one command: ARGV[1]
// pairs to KEYS[1] (outcomes), the next ARGV[2] to KEYS[2] (attempts), the
// rest to KEYS[3] (durations). A batch is added all or none, and costs one
// round trip.
var addScript = redis.NewScript(`
local outcomes = tonumber(ARGV[1])
local attempts = tonumber(ARGV[2])
for i = 3, #ARGV, 2 do
  local n = (i - 3) / 2
  local key = KEYS[3]
  if n < outcomes then key = KEYS[1] elseif n < outcomes + attempts then key = KEYS[2] end
  redis.call('HINCRBY', key, ARGV[i], ARGV[i + 1])
end
return 0
`)

// kind is which hash a count goes to: 0 outcomes, 1 attempts, 2 durations.
func (c Count) kind() int {
	switch {
	case c.IsDuration():
		return 2
	case c.IsAttempt():
		return 1
	}
	return 0
}

// Add adds counts to the hashes, all or none.
func (h *Handoff) Add(ctx context.Context, counts ...Count) error {
	if h.rdb == nil {
		return errNoRedis
	}
	args := make([]any, 2, 2+2*len(counts))
	var per [3]int
	for k := range per {
		for _, c := range counts {
			if c.kind() == k {
				args = append(args, field(c), c.N)
				per[k]++
			}
		}
	}
	args[0], args[1] = per[0], per[1]
	if err := addScript.Run(ctx, h.rdb, []string{Key, AttemptsKey, DurationsKey}, args...).Err(); err != nil {
		return fmt.Errorf("redis HINCRBY %s, %s, %s: %w", Key, AttemptsKey, DurationsKey, err)
	}
	return nil
}

// drainScript reads and deletes the hashes in one step, so that no
// increment is read twice (by two scrapes) or lost between the read and
// the delete.
var drainScript = redis.NewScript(`
local v = redis.call('HGETALL', KEYS[1])
local a = redis.call('HGETALL', KEYS[2])
local d = redis.call('HGETALL', KEYS[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return {v, a, d}
`)

// Drain takes every count handed off so far out of the hashes. A field that
// does not decode (written by something other than Homing) is dropped
// with a warning naming it; the others are returned.
func (h *Handoff) Drain(ctx context.Context) ([]Count, error) {
	if h.rdb == nil {
		return nil, errNoRedis
	}
	res, err := drainScript.Run(ctx, h.rdb, []string{Key, AttemptsKey, DurationsKey}).Slice()
	if err != nil {
		return nil, fmt.Errorf("drain redis hashes %s, %s, %s: %w", Key, AttemptsKey, DurationsKey, err)
	}
	var out []Count
	for k, key := range []string{Key, AttemptsKey, DurationsKey} {
		var v []any
		if k < len(res) {
			v, _ = res[k].([]any)
		}
		for i := 0; i+1 < len(v); i += 2 {
			f, _ := v[i].(string)
			n, _ := v[i+1].(string)
			c, err := parse(f, n, k)
			if err != nil {
				h.log.Warn("handed-off count dropped: not one of Homing's", "key", key, "field", f, "value", n, "error", err.Error())
				continue
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// field is c's labels as a JSON array: no separator a tenant or webhook name
// could contain can split it wrongly. An outcome's is [tenant, webhook,
// status, reason], an attempt's [tenant, webhook, class]; a duration's is
// its bucket (or SumField) as it is.
func field(c Count) string {
	var b []byte
	if c.IsDuration() {
		return c.Bucket
	}
	if c.IsAttempt() {
		b, _ = json.Marshal([3]string{c.Tenant, c.Webhook, c.Class})
	} else {
		b, _ = json.Marshal([4]string{c.Tenant, c.Webhook, c.Status, c.Reason})
	}
	return string(b)
}

// parse decodes one field of the hash of kind (Count.kind).
func parse(f, n string, kind int) (Count, error) {
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return Count{}, fmt.Errorf("count %q is not an integer: %w", n, err)
	}
	if kind == 2 {
		if f != SumField && f != "+Inf" {
			if _, err := strconv.ParseFloat(f, 64); err != nil {
				return Count{}, fmt.Errorf("field is not a bucket's upper bound, +Inf or %s", SumField)
			}
		}
		return Count{Bucket: f, N: v}, nil
	}
	attempt := kind == 1
	var labels []string
	err = json.Unmarshal([]byte(f), &labels)
	switch {
	case attempt && (err != nil || len(labels) != 3 || labels[2] == ""):
		return Count{}, fmt.Errorf("field is not a JSON array of tenant, webhook, class")
	case !attempt && (err != nil || len(labels) != 4):
		return Count{}, fmt.Errorf("field is not a JSON array of tenant, webhook, status, reason")
	}
	if attempt {
		return Count{Tenant: labels[0], Webhook: labels[1], Class: labels[2], N: v}, nil
	}
	return Count{Tenant: labels[0], Webhook: labels[1], Status: labels[2], Reason: labels[3], N: v}, nil
}
