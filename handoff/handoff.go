// Package handoff carries the delivery outcomes of a process that serves no
// metrics (homing serve, the command line, a publisher's synchronous
// transitions, a worker with metrics.addr empty) to the processes that do,
// so that homing_deliveries_total counts every outcome once across the
// fleet, whichever process caused it (issue 25).
//
// A process without metrics adds its counts to one Redis hash (Key) with
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
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/models"
)

// Key is the Redis hash the counts wait in, beside asynq's keys.
const Key = "homing:outcomes"

// Timeout bounds one Redis call of Add or Drain: a Redis that does not
// answer costs a command or an API request this long at most, and a scrape
// no more than this.
const Timeout = 2 * time.Second

// Count is n deliveries moved to Status for Reason, of Tenant's Webhook: one
// series of homing_deliveries_total and how much to add to it.
type Count struct {
	Tenant, Webhook, Status, Reason string
	N                               int64
}

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
	rdb redis.UniversalClient
	log *slog.Logger

	mu       sync.Mutex
	idle     *sync.Cond // broadcast when sending stops
	pending  map[labels]int64
	flushing bool // a caller or a goroutine is sending pending
}

// labels name one series of homing_deliveries_total.
type labels struct{ tenant, webhook, status, reason string }

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
	h := &Handoff{rdb: rdb, log: log, pending: map[labels]int64{}}
	h.idle = sync.NewCond(&h.mu)
	return h
}

// errNoRedis is why counts cannot be handed off by a process with no go-redis
// client.
var errNoRedis = errors.New("this process has no Redis to hand them off with (set redis.url; for package transition, Config.Redis)")

// Deliveries hands off n of webhook's deliveries moved to status for reason.
// It is dispatch.Observer's (and so webhook.Observer's and tenant.Observer's)
// method: the change is committed, so a Redis that fails cannot undo it;
// the loss is logged at ERROR with how many were not counted and why,
// never silent.
func (h *Handoff) Deliveries(tenant, webhook, status, reason string, n int) {
	if n <= 0 {
		return
	}
	h.mu.Lock()
	h.pending[labels{tenant, webhook, status, reason}] += int64(n)
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

// Attempt hands off the status an attempt left its delivery in; the
// attempt's class and duration stay with homing_attempts_total of the
// process that made it, which has none here.
func (h *Handoff) Attempt(tenant, webhook, _ string, _ time.Duration, status, reason string) {
	if status != "" {
		h.Deliveries(tenant, webhook, status, reason, 1)
	}
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
		counts = append(counts, Count{Tenant: l.tenant, Webhook: l.webhook, Status: l.status, Reason: l.reason, N: n})
		total += n
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := h.Add(ctx, counts...); err != nil {
		series := make([]string, len(counts))
		for i, c := range counts {
			series[i] = fmt.Sprintf("tenant=%s webhook=%s status=%s reason=%s n=%d", models.TenantOr(c.Tenant), c.Webhook, c.Status, c.Reason, c.N)
		}
		slices.Sort(series)
		h.log.Error("delivery outcomes not counted in homing_deliveries_total: handing them to the workers' metrics through Redis failed (the deliveries themselves are recorded)",
			"not_counted", total, "series", series, "error", err.Error())
	}
}

// addScript adds ARGV's field, count pairs to the hash in one command: a
// batch is added all or none, and costs one round trip.
var addScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 0
`)

// Add adds counts to the hash, all or none.
func (h *Handoff) Add(ctx context.Context, counts ...Count) error {
	if h.rdb == nil {
		return errNoRedis
	}
	args := make([]any, 0, 2*len(counts))
	for _, c := range counts {
		args = append(args, field(c), c.N)
	}
	if err := addScript.Run(ctx, h.rdb, []string{Key}, args...).Err(); err != nil {
		return fmt.Errorf("redis HINCRBY %s: %w", Key, err)
	}
	return nil
}

// drainScript reads and deletes the hash in one step, so that no
// increment is read twice (by two scrapes) or lost between the read and
// the delete.
var drainScript = redis.NewScript(`
local v = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return v
`)

// Drain takes every count handed off so far out of the hash. A field that
// does not decode (written by something other than Homing) is dropped
// with a warning naming it; the others are returned.
func (h *Handoff) Drain(ctx context.Context) ([]Count, error) {
	if h.rdb == nil {
		return nil, errNoRedis
	}
	v, err := drainScript.Run(ctx, h.rdb, []string{Key}).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("drain redis hash %s: %w", Key, err)
	}
	out := make([]Count, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		c, err := parse(v[i], v[i+1])
		if err != nil {
			h.log.Warn("handed-off delivery outcome dropped: not one of Homing's", "key", Key, "field", v[i], "value", v[i+1], "error", err.Error())
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// field is c's labels as a JSON array: no separator a tenant or webhook name
// could contain can split it wrongly.
func field(c Count) string {
	b, _ := json.Marshal([4]string{c.Tenant, c.Webhook, c.Status, c.Reason})
	return string(b)
}

func parse(f, n string) (Count, error) {
	var labels [4]string
	if err := json.Unmarshal([]byte(f), &labels); err != nil {
		return Count{}, fmt.Errorf("field is not a JSON array of tenant, webhook, status, reason: %w", err)
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return Count{}, fmt.Errorf("count %q is not an integer: %w", n, err)
	}
	return Count{Tenant: labels[0], Webhook: labels[1], Status: labels[2], Reason: labels[3], N: v}, nil
}
