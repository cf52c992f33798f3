package sweeper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// bed is a sweeper on a real database and a real Redis, with no worker:
// what a sweep queued stays in asynq to be counted.
type bed struct {
	t     *testing.T
	db    *gorm.DB
	clock *clock.Stub
	insp  *asynq.Inspector
	opt   asynq.RedisClientOpt
	s     *sweeper.Sweeper
	seq   int
}

func newBed(t *testing.T, open func(testing.TB) *gorm.DB, cfg sweeper.Config) *bed {
	t.Helper()
	db := open(t)
	opt, _ := testenv.Redis(t)
	client := asynq.NewClient(opt)
	insp := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = client.Close(); _ = insp.Close() })
	b := &bed{t: t, db: db, clock: clock.NewStub(t0), insp: insp, opt: opt}
	b.s = b.sweeper(client, cfg)
	return b
}

// sweeper is a sweeper of the bed's database and clock with cfg, enqueueing
// through client. A step of thousands of enqueues, or of four sweepers'
// writes waiting on SQLite's one writer, may take longer than the
// production StepTimeout on a loaded machine: the tests judge what a step
// does, not how fast (seen: a 10,001-row probe test past 10 s at load 30,
// four sweeps at once on SQLite past it at load 15), so it is an hour.
func (b *bed) sweeper(client *asynq.Client, cfg sweeper.Config) *sweeper.Sweeper {
	cfg.Clock, cfg.NewTask, cfg.TaskID = b.clock, tasks.NewSweptRetryTask, tasks.RetryTaskID
	cfg.StepTimeout = time.Hour
	return sweeper.New(b.db, client, b.insp, cfg)
}

func (b *bed) webhook(id string, rateLimit int) {
	b.t.Helper()
	w := models.Webhook{
		ID: id, Name: id, DocType: "Sales Order", DocEvent: "on_submit", RequestURL: "http://127.0.0.1:1/",
		RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
		Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 1000, RateLimit: rateLimit, CreatedAt: t0, UpdatedAt: t0,
	}
	if err := b.db.Create(&w).Error; err != nil {
		b.t.Fatal(err)
	}
}

// due inserts n Failed rows of webhook, due one millisecond apart from
// at, and returns their IDs in due order.
func (b *bed) due(webhook string, n int, at time.Time) []string {
	b.t.Helper()
	var ids []string
	rows := make([]models.Delivery, n)
	for i := range rows {
		b.seq++
		id := fmt.Sprintf("%s-%05d", webhook, b.seq)
		next := at.Add(time.Duration(i) * time.Millisecond)
		rows[i] = models.Delivery{
			ID: id, WebhookID: webhook, WebhookName: webhook, EventID: "ev-" + id, DocType: "Sales Order", DocEvent: "on_submit",
			Method: "POST", URL: "http://127.0.0.1:1/", Headers: models.StringMap{}, Payload: []byte(`{}`),
			Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: &next, CreatedAt: at, UpdatedAt: at,
		}
		ids = append(ids, id)
	}
	if err := b.db.CreateInBatches(rows, 200).Error; err != nil {
		b.t.Fatal(err)
	}
	return ids
}

// queued lists the delivery IDs of the retry tasks in asynq, pending and
// scheduled.
func (b *bed) queued() map[string]bool {
	b.t.Helper()
	out := map[string]bool{}
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){b.insp.ListPendingTasks, b.insp.ListScheduledTasks} {
		for page := 1; ; page++ {
			infos, err := list("default", asynq.PageSize(1000), asynq.Page(page))
			if err != nil {
				return out // the queue does not exist yet
			}
			for _, ti := range infos {
				p, err := tasks.DecodeDelivery(ti.Payload)
				if err != nil {
					b.t.Fatal(err)
				}
				if out[p.DeliveryID] {
					b.t.Fatalf("delivery %s queued twice", p.DeliveryID)
				}
				out[p.DeliveryID] = true
			}
			if len(infos) < 1000 {
				break
			}
		}
	}
	return out
}

func (b *bed) setHealth(webhook string, failures int) {
	b.t.Helper()
	if err := b.db.Exec("UPDATE webhook_health SET failures = ?, failing_since = ? WHERE webhook_id = ?", failures, t0, webhook).Error; err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) health(webhook string) models.WebhookHealth {
	b.t.Helper()
	var h models.WebhookHealth
	if err := b.db.Where("webhook_id = ?", webhook).Take(&h).Error; err != nil {
		b.t.Fatal(err)
	}
	return h
}

// tickRun is a Tick running in the background on the bed's stub clock,
// which moves only when the test advances it: the test waits for the tick
// to sleep on the clock (or to end), looks at what it did so far, and
// moves the clock on.
type tickRun struct {
	clock *clock.Stub
	done  chan struct{}
	res   sweeper.Result
	err   error
}

// startTick runs s.Tick in the background; it is cancelled, and waited
// for, when the test ends.
func (b *bed) startTick(s *sweeper.Sweeper) *tickRun {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &tickRun{clock: b.clock, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = s.Tick(ctx)
	}()
	b.t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// sleeping waits until the tick sleeps on the clock (true) or has ended
// (false).
func (r *tickRun) sleeping() bool {
	select {
	case <-r.clock.Sleeping(1):
		return true
	case <-r.done:
		return false
	}
}

// result waits for the tick to end and returns what it did.
func (r *tickRun) result(t *testing.T) sweeper.Result {
	t.Helper()
	<-r.done
	if r.err != nil {
		t.Fatalf("tick: %v", r.err)
	}
	return r.res
}

func (b *bed) step() sweeper.Result {
	b.t.Helper()
	res, err := b.s.RunOnce(context.Background())
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

// One webhook's backlog does not starve another's: a step shares its batch
// out webhook by webhook, so B's few rows go in the first step although A's
// many are older, and the step does not read again what it queued.
func TestStepIsFairAcrossWebhooks(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50})
			b.webhook("a", 0)
			b.webhook("b", 0)
			b.due("a", 300, t0.Add(-time.Hour))
			bIDs := b.due("b", 3, t0.Add(-time.Minute))
			res := b.step()
			if res.Due > 50 || res.Enqueued != res.Due || res.Due < 35 {
				t.Fatalf("first step %+v, want at most a batch of 50, B's 3 included", res)
			}
			q := b.queued()
			for _, id := range bIDs {
				if !q[id] {
					t.Errorf("B's row %s waits behind A's backlog", id)
				}
			}
			// The next steps take rows not yet queued, until none is due.
			total := res.Enqueued
			for range 10 {
				r := b.step()
				total += r.Enqueued
				if r.InHand != 0 {
					t.Fatalf("a step read rows already queued: %+v", r)
				}
			}
			if total != 303 || len(b.queued()) != 303 {
				t.Fatalf("steps queued %d (%d in asynq), want 303", total, len(b.queued()))
			}
		})
	}
}

// A tick keeps taking batches while rows are due and the queue has room,
// so the retry path is not capped at one batch per interval; and it stops
// adding to a queue at its high-water mark. The tick runs on the stub
// clock: what it does is counted in steps, not in seconds.
func TestTickDrainsUpToTheHighWaterMark(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 40, MaxPending: 100, Interval: time.Second})
			b.webhook("a", 0)
			b.due("a", 500, t0.Add(-time.Hour))
			// No worker empties the queue: the tick fills it past the mark
			// by less than one batch, in three steps of 40, then waits for
			// room until its budget has passed.
			run := b.startTick(b.s)
			if !run.sleeping() {
				t.Fatalf("tick ended (%+v), want it waiting on the full queue", run.res)
			}
			if got := len(b.queued()); got != 120 {
				t.Fatalf("%d queued when the tick waits, want 120 (three steps of 40, the third past the mark of 100)", got)
			}
			b.clock.Advance(b.s.TickBudget())
			if res := run.result(t); res.Enqueued != 120 || res.Steps != 3 {
				t.Fatalf("tick %+v, want 120 queued in 3 steps", res)
			}
			// Emptied (as workers would), the queue takes the rest.
			if _, err := b.insp.DeleteAllPendingTasks("default"); err != nil {
				t.Fatal(err)
			}
			client := asynq.NewClient(b.opt)
			defer client.Close()
			b.s = b.sweeper(client, sweeper.Config{BatchSize: 40, MaxPending: 1000})
			res2, err := b.s.Tick(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res2.Enqueued != 380 {
				t.Fatalf("second tick queued %d, want the other 380", res2.Enqueued)
			}
		})
	}
}

// A tick that met a full queue goes on once the workers make room, rather
// than leaving the rest for the next tick: each time the tick waits, the
// test empties the queue as workers would and moves the clock to the
// tick's next look, and one tick queues the whole backlog, ending by
// itself well inside its budget.
func TestTickResumesWhenTheQueueHasRoom(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 40, MaxPending: 100, Interval: 10 * time.Second})
			b.webhook("a", 0)
			b.due("a", 500, t0.Add(-time.Hour))
			run := b.startTick(b.s)
			looks := 0
			for run.sleeping() {
				if _, err := b.insp.DeleteAllPendingTasks("default"); err != nil {
					t.Fatal(err)
				}
				b.clock.Advance(sweeper.PollFull)
				if looks++; looks > 100 {
					t.Fatalf("the tick still waits after %d looks", looks)
				}
			}
			res := run.result(t)
			if res.Enqueued != 500 || !b.clock.Now().Before(t0.Add(b.s.TickBudget())) {
				t.Fatalf("tick %+v ended at +%s (budget %s), want all 500 queued in one tick, ended by itself",
					res, b.clock.Now().Sub(t0), b.s.TickBudget())
			}
		})
	}
}

// While a webhook is failing, a step takes one row as its probe at most
// once a probe gap, and records which; the other due rows wait.
func TestFailingWebhookIsProbedOneRowAtATime(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50, ProbeInterval: 10 * time.Second})
			b.webhook("dead", 0)
			b.webhook("fine", 0)
			ids := b.due("dead", 250, t0.Add(-time.Hour)) // five batches
			b.due("fine", 5, t0.Add(-time.Hour))
			b.setHealth("dead", models.FailingAfter)
			res := b.step()
			if res.Probes != 1 || res.Enqueued != 6 {
				t.Fatalf("step %+v, want the probe and the healthy webhook's 5", res)
			}
			h := b.health("dead")
			if h.ProbeID == nil || *h.ProbeID != ids[0] || !b.queued()[ids[0]] {
				t.Fatalf("probe %v, want the oldest due row %s, queued", h.ProbeID, ids[0])
			}
			// The first gap (TestFailingWebhookProbesBackOff has the rest).
			b.clock.Advance(999 * time.Millisecond)
			if res := b.step(); res.Due != 0 {
				t.Fatalf("a second probe inside the first gap: %+v", res)
			}
			b.clock.Advance(time.Millisecond)
			if res := b.step(); res.Probes != 1 || res.Due != 1 {
				t.Fatalf("after the first gap %+v, want one more probe", res)
			}
			if h := b.health("dead"); *h.ProbeID != ids[1] {
				t.Fatalf("second probe %s, want %s", *h.ProbeID, ids[1])
			}
			// Healthy again (a success cleared it): the rest go.
			b.setHealth("dead", 0)
			total := 0
			for range 40 {
				total += b.step().Enqueued
			}
			if total != 248 {
				t.Fatalf("after recovery %d queued, want the other 248", total)
			}
		})
	}
}

// A webhook with a rate_limit gets at most rate × tick rows a tick, spread
// over the tick from the step's time, so the retries arrive at its rate:
// the k-th row taken is processed k/rate after the step, by the sweeper's
// clock. The stub clock stands a day ahead of the wall clock, so asynq
// schedules every one of them (a time it sees as past is pending at once),
// and it keeps whole seconds.
func TestRateLimitedWebhookIsPacedOverTheTick(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Interval 5s: a tick's budget is 4.5s, its quota 2 × 4 rows.
			b := newBed(t, open, sweeper.Config{BatchSize: 50, Interval: 5 * time.Second})
			now := time.Now().Add(24 * time.Hour).Truncate(time.Second).UTC()
			b.clock.Set(now)
			b.webhook("slow", 2)
			ids := b.due("slow", 100, now.Add(-time.Hour))
			res, err := b.s.Tick(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Enqueued != 8 || res.Steps != 1 {
				t.Fatalf("tick %+v, want 8 (2/s over a 4s tick) in one step", res)
			}
			pending, err := b.insp.ListPendingTasks("default")
			if err != nil || len(pending) != 1 {
				t.Fatalf("%d pending (%v), want the first at once", len(pending), err)
			}
			if p, err := tasks.DecodeDelivery(pending[0].Payload); err != nil || p.DeliveryID != ids[0] {
				t.Fatalf("pending retry %+v (%v), want the oldest row %s", p, err, ids[0])
			}
			scheduled, err := b.insp.ListScheduledTasks("default")
			if err != nil || len(scheduled) != 7 {
				t.Fatalf("%d scheduled (%v), want 7 spread after the first", len(scheduled), err)
			}
			at := map[string]time.Time{}
			for _, ti := range scheduled {
				p, err := tasks.DecodeDelivery(ti.Payload)
				if err != nil {
					t.Fatal(err)
				}
				at[p.DeliveryID] = ti.NextProcessAt.UTC()
			}
			for k := 1; k < 8; k++ {
				// k × 0.5 s after the step, in whole seconds.
				want := now.Add(time.Duration(k) * 500 * time.Millisecond).Truncate(time.Second)
				if got, ok := at[ids[k]]; !ok || !got.Equal(want) {
					t.Errorf("row %d (%s) processed at %v (scheduled %v), want %v", k, ids[k], got, ok, want)
				}
			}
		})
	}
}

// A row whose retry task was lost (Redis lost its data) is taken again once
// its queued mark is older than the lease.
func TestLostRetryTaskIsQueuedAgainAfterTheLease(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50, Interval: 5 * time.Second})
			b.webhook("a", 0)
			b.due("a", 10, t0.Add(-time.Hour))
			if res := b.step(); res.Enqueued != 10 {
				t.Fatalf("step %+v", res)
			}
			if _, err := b.insp.DeleteAllPendingTasks("default"); err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(59 * time.Second)
			if res := b.step(); res.Due != 0 {
				t.Fatalf("rows taken again inside the lease: %+v", res)
			}
			b.clock.Advance(time.Second)
			if res := b.step(); res.Enqueued != 10 {
				t.Fatalf("after the lease %+v, want the 10 lost retries queued again", res)
			}
		})
	}
}

// When Redis refuses the enqueues, a step stops, hands every row it took
// back (none stays marked queued), and the next sweep, with Redis back,
// queues them all. (Under -race this also covers the step's enqueuers and
// its own loop recording failures at the same time.)
func TestFailedEnqueuesHandTheirRowsBack(t *testing.T) {
	t.Parallel()
	b := newBed(t, testenv.Postgres, sweeper.Config{BatchSize: 200})
	b.webhook("A", 0)
	ids := b.due("A", 200, t0.Add(-time.Minute))
	down := asynq.NewClient(asynq.RedisClientOpt{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = down.Close() })
	broken := b.sweeper(down, sweeper.Config{BatchSize: 200})
	res, err := broken.RunOnce(context.Background())
	if err == nil {
		t.Fatalf("a sweep with Redis down returned %+v and no error", res)
	}
	if got := b.queued(); len(got) != 0 {
		t.Fatalf("%d retries queued with Redis down", len(got))
	}
	var marked int64
	if err := b.db.Model(&models.Delivery{}).Where("queued_at IS NOT NULL").Count(&marked).Error; err != nil {
		t.Fatal(err)
	}
	if marked != 0 {
		t.Fatalf("%d rows stay marked queued after the failed step; each must be handed back", marked)
	}
	if res := b.step(); res.Enqueued != len(ids) {
		t.Fatalf("the next sweep queued %d, want all %d", res.Enqueued, len(ids))
	}
	if got := b.queued(); len(got) != len(ids) {
		t.Fatalf("%d retries in asynq, want %d", len(got), len(ids))
	}
}

// A tick whose budget ends mid-step is not an error, whichever way the
// database reports the interrupted statement (PostgreSQL the deadline,
// SQLite "interrupted"): the next tick goes on.
func TestTickBudgetEndingMidStepIsNotAnError(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 200, MaxPending: 100000, Interval: time.Second})
			b.webhook("a", 0)
			b.due("a", 600, t0.Add(-time.Hour))
			// Budgets from nothing to a few milliseconds end at every point
			// of a step: in the query, in the enqueues, between steps.
			for budget := time.Duration(0); budget < 5*time.Millisecond; budget += 250 * time.Microsecond {
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				_, err := b.s.Tick(ctx)
				cancel()
				if err != nil {
					t.Fatalf("a tick with a budget of %s: %v", budget, err)
				}
			}
		})
	}
}

// tenantWebhook adds webhook id in tenant ten (created if need be).
func (b *bed) tenantWebhook(ten, id string) {
	b.t.Helper()
	if err := b.db.Where(models.Tenant{Name: ten}).FirstOrCreate(&models.Tenant{Name: ten, Enabled: true, PortalOrigins: models.StringList{}, CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
		b.t.Fatal(err)
	}
	b.webhook(id, 0)
	if err := b.db.Exec("UPDATE webhooks SET tenant = ? WHERE id = ?", ten, id).Error; err != nil {
		b.t.Fatal(err)
	}
}

// One tenant's backlog over many webhooks does not starve another tenant's
// one webhook: a step shares its batch tenant by tenant first, so B gets
// half of it although A has ten webhooks with older rows. Shared webhook
// by webhook, as before, B would get one row in eleven.
func TestStepIsFairAcrossTenants(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50})
			for i := range 10 {
				id := fmt.Sprintf("a%d", i)
				b.tenantWebhook("a", id)
				b.due(id, 100, t0.Add(-time.Hour))
			}
			b.tenantWebhook("b", "b")
			bIDs := b.due("b", 40, t0.Add(-time.Minute))
			res := b.step()
			if res.Due != 50 {
				t.Fatalf("first step %+v, want a batch of 50", res)
			}
			q := b.queued()
			var gotB int
			for _, id := range bIDs {
				if q[id] {
					gotB++
				}
			}
			if gotB != 25 {
				t.Fatalf("B got %d of the step's 50 rows, want half (25)", gotB)
			}
			// The second step takes B's last 15, and the rest is A's.
			b.step()
			q = b.queued()
			for _, id := range bIDs {
				if !q[id] {
					t.Fatalf("B's row %s still waits after two steps", id)
				}
			}
			if len(q) != 100 {
				t.Fatalf("two steps queued %d rows, want 100", len(q))
			}
		})
	}
}

// A disabled tenant's due rows are left where they are: a step queues
// none of them and chooses no probe among them, while another tenant's
// are queued as ever. Enabled again, the next step takes them all.
func TestStepLeavesADisabledTenantsRows(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50})
			b.tenantWebhook("a", "a")
			b.tenantWebhook("a", "a-failing")
			b.tenantWebhook("b", "b")
			b.setHealth("a-failing", models.FailingAfter)
			aIDs := append(b.due("a", 3, t0.Add(-time.Hour)), b.due("a-failing", 2, t0.Add(-time.Hour))...)
			bIDs := b.due("b", 3, t0.Add(-time.Minute))
			if err := b.db.Model(&models.Tenant{}).Where("name = ?", "a").Update("enabled", false).Error; err != nil {
				t.Fatal(err)
			}
			res := b.step()
			q := b.queued()
			if res.Due != 3 || res.Probes != 0 || len(q) != 3 {
				t.Fatalf("step %+v queued %d rows, want b's 3 and no probe", res, len(q))
			}
			for _, id := range bIDs {
				if !q[id] {
					t.Errorf("enabled tenant b's row %s was not queued", id)
				}
			}
			var marked int64
			if err := b.db.Model(&models.Delivery{}).Where("id IN ? AND queued_at IS NOT NULL", aIDs).Count(&marked).Error; err != nil || marked != 0 {
				t.Fatalf("%d of disabled tenant a's rows marked queued (%v), want none", marked, err)
			}
			if h := b.health("a-failing"); h.ProbeID != nil {
				t.Fatalf("a probe was chosen for a disabled tenant's webhook: %+v", h)
			}

			if err := b.db.Model(&models.Tenant{}).Where("name = ?", "a").Update("enabled", true).Error; err != nil {
				t.Fatal(err)
			}
			res = b.step()
			q = b.queued()
			if res.Due != 4 || res.Probes != 1 {
				t.Fatalf("step once a is enabled again %+v, want a's 3 and one probe of a-failing", res)
			}
			for _, id := range aIDs[:3] {
				if !q[id] {
					t.Errorf("tenant a's row %s was not queued once a was enabled again", id)
				}
			}
		})
	}
}

// The due backlog (homing_due_backlog, homing_oldest_due_age_seconds)
// counts what the sweeper and the workers owe: a disabled tenant's due
// rows are held by its operator, and left out until it is enabled again.
func TestBacklogLeavesOutADisabledTenant(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{})
			b.tenantWebhook("a", "a")
			b.tenantWebhook("b", "b")
			b.due("a", 3, t0.Add(-time.Hour))
			b.due("b", 2, t0.Add(-time.Minute))
			if err := b.db.Exec("UPDATE deliveries SET tenant = webhook_id").Error; err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				aEnabled bool
				n        int64
				oldest   time.Time
			}{{true, 5, t0.Add(-time.Hour)}, {false, 2, t0.Add(-time.Minute)}} {
				if err := b.db.Model(&models.Tenant{}).Where("name = ?", "a").Update("enabled", c.aEnabled).Error; err != nil {
					t.Fatal(err)
				}
				n, oldest, err := b.s.Backlog(context.Background())
				if err != nil || n != c.n || !oldest.Equal(c.oldest) {
					t.Errorf("a enabled %v: backlog %d, oldest %v (%v); want %d, %v", c.aEnabled, n, oldest, err, c.n, c.oldest)
				}
			}
		})
	}
}
