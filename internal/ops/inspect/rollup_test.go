package inspect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// TestRollupSettleOutlastsTheLongestAttempt: an attempt's row is written
// when its request ends, up to webhook.MaxTimeout after its at; an hour
// rolled up before that would never count it.
func TestRollupSettleOutlastsTheLongestAttempt(t *testing.T) {
	t.Parallel()
	if inspect.RollupSettle < webhook.MaxTimeout+time.Minute {
		t.Fatalf("rollupSettle %s: an attempt may be written up to webhook.MaxTimeout (%s) after its at", inspect.RollupSettle, webhook.MaxTimeout)
	}
}

// direct is what the console's 24-hour reads must answer, counted in Go
// from every delivery and attempt row: the oracle the rollup is held to.
type direct struct {
	created  map[string]map[int]int64 // webhook → hour of the chart → deliveries
	failures map[string]map[int]int64 // webhook → hour of the chart → failed attempts
	day      map[string]int64         // status → deliveries created in the day
	tenants  map[string][2]int64      // tenant → deliveries in the day, failing
	rate     map[string][2]int64      // webhook → attempts in the day, 2xx
}

func countDirectly(t *testing.T, db *gorm.DB, tenant string, now time.Time) direct {
	t.Helper()
	var dels []models.Delivery
	if err := db.Find(&dels).Error; err != nil {
		t.Fatal(err)
	}
	var atts []models.Attempt
	if err := db.Find(&atts).Error; err != nil {
		t.Fatal(err)
	}
	start := now.UTC().Truncate(time.Hour).Add(time.Hour - inspect.ActivityHours*time.Hour)
	dayStart := now.Add(-24 * time.Hour)
	d := direct{created: map[string]map[int]int64{}, failures: map[string]map[int]int64{}, day: map[string]int64{},
		tenants: map[string][2]int64{}, rate: map[string][2]int64{}}
	add := func(m map[string]map[int]int64, hook string, h int) {
		if m[hook] == nil {
			m[hook] = map[int]int64{}
		}
		m[hook][h]++
	}
	byID := map[string]models.Delivery{}
	for _, r := range dels {
		byID[r.ID] = r
		if !r.CreatedAt.Before(dayStart) {
			c := d.tenants[r.Tenant]
			c[0]++
			if r.Status != models.StatusDelivered {
				c[1]++
			}
			d.tenants[r.Tenant] = c
		}
		if r.Tenant != tenant {
			continue
		}
		if h := int(r.CreatedAt.Sub(start) / time.Hour); !r.CreatedAt.Before(start) && h < inspect.ActivityHours {
			add(d.created, r.WebhookName, h)
		}
		if !r.CreatedAt.Before(dayStart) {
			d.day[r.Status]++
		}
	}
	for _, a := range atts {
		r := byID[a.DeliveryID]
		if r.Tenant != tenant {
			continue
		}
		if h := int(a.At.Sub(start) / time.Hour); a.Class != "2xx" && !a.At.Before(start) && h < inspect.ActivityHours {
			add(d.failures, r.WebhookName, h)
		}
		if !a.At.Before(dayStart) && a.At.Before(now) {
			c := d.rate[r.WebhookName]
			c[0]++
			if a.Class == "2xx" {
				c[1]++
			}
			d.rate[r.WebhookName] = c
		}
	}
	return d
}

// compare reads what the console shows in tenant at now and holds it
// against the direct count.
func compare(t *testing.T, db *gorm.DB, tenant string, now time.Time, hooks []string) {
	t.Helper()
	ctx := context.Background()
	want := countDirectly(t, db, tenant, now)
	act, err := inspect.ReadActivity(ctx, db, tenant, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]inspect.WebhookActivity{}
	for _, w := range act.Webhooks {
		got[w.Webhook] = w
	}
	for _, hook := range hooks {
		for h := range inspect.ActivityHours {
			g := got[hook].Hours[h]
			if g.Deliveries != want.created[hook][h] || g.Failures != want.failures[hook][h] {
				t.Errorf("%s at %s, tenant %s, webhook %s, hour %d: chart %+v, direct count %d deliveries %d failures",
					t.Name(), now.Format(time.TimeOnly), tenant, hook, h, g, want.created[hook][h], want.failures[hook][h])
			}
		}
		r, err := inspect.WebhookSuccessRate(ctx, db, tenant, hook, now, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if w := want.rate[hook]; r.Attempts != w[0] || r.Succeeded != w[1] {
			t.Errorf("at %s, tenant %s, webhook %s: success rate %+v, direct count %d attempts %d 2xx", now.Format(time.TimeOnly), tenant, hook, r, w[0], w[1])
		}
	}
	o, err := inspect.ReadOverview(ctx, db, tenant, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range inspect.Statuses {
		if o.LastDay[s] != want.day[s] {
			t.Errorf("at %s, tenant %s: last day %v, direct count %v", now.Format(time.TimeOnly), tenant, o.LastDay, want.day)
			break
		}
	}
	counts, err := inspect.ReadTenantCounts(ctx, db, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if w := want.tenants[c.Tenant]; c.Deliveries != w[0] || c.Failing != w[1] {
			t.Errorf("at %s, tenant %s: %d deliveries %d failing in the day, direct count %v", now.Format(time.TimeOnly), c.Tenant, c.Deliveries, c.Failing, w)
		}
	}
}

// TestRollupAnswersAsADirectCount: the console's 24-hour reads, which
// count closed hours from the rollup, answer what a direct count of the
// rows answers: for two tenants with a webhook of the same name, at several
// moments (an hour rolled up, the next not yet), and after deliveries of
// hours already rolled up changed status (a retry delivered one, another
// was exhausted, an old one requeued) and made attempts in later hours.
func TestRollupAnswersAsADirectCount(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			if err := db.Exec("INSERT INTO tenants (name, created_at, updated_at) VALUES ('acme', ?, ?)", t0, t0).Error; err != nil {
				t.Fatal(err)
			}
			now := t0.Add(48*time.Hour + 7*time.Minute) // within the settle: the last hour is not rolled yet
			code := 200
			attempt := func(id, tenant string, n int, at time.Time, class string) {
				t.Helper()
				a := models.Attempt{DeliveryID: id, Tenant: tenant, Attempt: n, At: at, Class: class, Method: "POST", URL: "u"}
				if class == "2xx" {
					a.StatusCode = &code
				}
				if err := db.Create(&a).Error; err != nil {
					t.Fatal(err)
				}
			}
			set := func(id string, v map[string]any) {
				t.Helper()
				if err := db.Model(&models.Delivery{}).Where("id = ?", id).Updates(v).Error; err != nil {
					t.Fatal(err)
				}
			}
			// Every 37 minutes for 27 hours: deliveries of "orders" and
			// "invoices" in default, of "orders" in acme; each tenth failed
			// and retried an hour later, each seventh Exhausted.
			var failed, exhausted []string
			for i := range 27 * 60 / 37 {
				at := now.Add(-27*time.Hour + time.Duration(i)*37*time.Minute)
				for _, d := range []struct{ tenant, hook string }{{"default", "orders"}, {"default", "invoices"}, {"acme", "orders"}} {
					id := addDelivery(t, db, d.hook, at)
					set(id, map[string]any{"tenant": d.tenant})
					switch {
					case i%10 == 0:
						attempt(id, d.tenant, 1, at, "5xx")
						attempt(id, d.tenant, 2, at.Add(time.Hour), "2xx")
						failed = append(failed, id)
					case i%7 == 0:
						attempt(id, d.tenant, 1, at, "timeout")
						set(id, map[string]any{"status": models.StatusExhausted, "last_error": "timeout"})
						exhausted = append(exhausted, id)
					default:
						attempt(id, d.tenant, 1, at.Add(time.Second), "2xx")
					}
				}
			}
			hooks := []string{"orders", "invoices"}
			for _, tenant := range []string{"default", "acme"} {
				compare(t, db, tenant, now, hooks)
			}
			var rolled int64
			if err := db.Model(&models.RolledHour{}).Count(&rolled).Error; err != nil {
				t.Fatal(err)
			}
			if rolled < 22 { // the 24 hours less the current one and the one within the settle
				t.Fatalf("%d hours rolled up, want the day's closed hours: the reads did not use the rollup", rolled)
			}

			// Rows of hours already rolled up change status: one Delivered
			// becomes Failed again (requeued), a Failed one Exhausted, an
			// Exhausted one Delivered by a retry made now.
			set(failed[len(failed)/2], map[string]any{"status": models.StatusExhausted, "last_error": "HTTP 503"})
			set(failed[len(failed)-3], map[string]any{"status": models.StatusFailed, "next_retry": now.Add(time.Hour)})
			set(exhausted[len(exhausted)/2], map[string]any{"status": models.StatusDelivered})
			attempt(exhausted[len(exhausted)/2], "default", 2, now.Add(-time.Minute), "2xx")
			var requeued models.Delivery
			if err := db.Where("status = ? AND tenant = 'acme'", models.StatusDelivered).Order("created_at").Offset(30).Take(&requeued).Error; err != nil {
				t.Fatal(err)
			}
			set(requeued.ID, map[string]any{"status": models.StatusFailed, "next_retry": now})
			for _, tenant := range []string{"default", "acme"} {
				compare(t, db, tenant, now, hooks)
			}

			// Later: the hour that was within the settle is rolled up now,
			// with the attempt made in it after the first reads.
			for _, later := range []time.Duration{4 * time.Minute, 13 * time.Minute, 75 * time.Minute} {
				for _, tenant := range []string{"default", "acme"} {
					compare(t, db, tenant, now.Add(later), hooks)
				}
			}
			if t.Failed() {
				fmt.Println("rollup rows:")
				var rows []models.ActivityHour
				db.Order("tenant, webhook_name, hour").Find(&rows)
				for _, r := range rows {
					fmt.Printf("  %+v\n", r)
				}
			}
		})
	}
}

// RollUp (the worker's hourly housekeeping) rolls up every closed hour of
// the console's day, once: run again it rolls nothing, and the console's
// reads after it find every hour they need rolled up already, and answer
// as a direct count.
func TestRollUpLeavesTheConsoleNothingToRoll(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := t0.Add(30*time.Hour + 25*time.Minute) // past the settle: the last closed hour may be rolled
			for i := range 30 * 60 / 41 {
				addDelivery(t, db, "orders", now.Add(-30*time.Hour+time.Duration(i)*41*time.Minute))
			}
			hours := func() int64 {
				t.Helper()
				var n int64
				if err := db.Model(&models.RolledHour{}).Count(&n).Error; err != nil {
					t.Fatal(err)
				}
				return n
			}
			n, err := inspect.RollUp(context.Background(), db, now)
			if err != nil {
				t.Fatal(err)
			}
			// The day's whole hours, from the first after now-24h to the last closed before the settle.
			if want := 23; n != want || hours() != int64(want) {
				t.Fatalf("RollUp rolled up %d hours (%d held), want %d", n, hours(), want)
			}
			if n, err := inspect.RollUp(context.Background(), db, now); err != nil || n != 0 {
				t.Fatalf("RollUp again: %d, %v; want nothing to roll", n, err)
			}
			compare(t, db, "default", now, []string{"orders"})
			if got := hours(); got != 23 {
				t.Fatalf("the console's reads rolled up %d more hours after RollUp", got-23)
			}
		})
	}
}
