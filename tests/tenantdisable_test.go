package tests

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// tenantSystem is a system with homing serve running alone (it accepts and
// relays; no worker fans out until the test starts one), the tenant acme,
// an operator client and a client of acme's own admin token, and a webhook
// of acme's to rc (timeout 60s: a held request outlasts any wait).
type tenantSystem struct {
	*system
	op, acme apiClient
}

func newTenantSystem(t *testing.T, rc *testreceiver.Receiver) *tenantSystem {
	t.Helper()
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	ts := &tenantSystem{system: s, op: s.startAPI(t)}
	ts.createAcme(t, rc)
	return ts
}

// createAcme creates the tenant acme, its admin token (ts.acme) and its
// webhook orders to rc.
func (ts *tenantSystem) createAcme(t *testing.T, rc *testreceiver.Receiver) {
	t.Helper()
	ts.op.expect(t, http.StatusCreated, "POST", "/v1/tenants", `{"name": "acme"}`)
	var tok map[string]any
	ts.ok(t, &tok, "homing", "token", "create", "--name", "acme-admin", "--scope", "admin", "--tenant", "acme", "--json")
	ts.acme = ts.op.withToken(tok["token"].(string))
	ts.acme.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q, "timeout": "60s"}`, rc.URL+"/orders"))
}

// setEnabled enables or disables acme, as an operator does.
func (ts *tenantSystem) setEnabled(t *testing.T, on bool) {
	t.Helper()
	ts.op.expect(t, http.StatusOK, "PATCH", "/v1/tenants/acme", fmt.Sprintf(`{"enabled": %v}`, on))
}

// publish publishes Sales Order id into acme, which must answer status.
func (ts *tenantSystem) publish(t *testing.T, status int, id string) apiReply {
	t.Helper()
	return ts.acme.expect(t, status, "POST", "/v1/events",
		fmt.Sprintf(`{"id": %q, "doc_type": "Sales Order", "doc_name": %q, "event": "on_submit", "doc": {"name": %q}}`, id, id, id))
}

// deliveryOf is the delivery of acme's event, nil while there is none.
func (ts *tenantSystem) deliveryOf(t *testing.T, eventID string) map[string]any {
	t.Helper()
	page := ts.acme.expect(t, http.StatusOK, "GET", "/v1/deliveries?event_id="+eventID, "")
	list, _ := page.body["deliveries"].([]any)
	if len(list) > 1 {
		t.Fatalf("event %s has %d deliveries, want 1: %s", eventID, len(list), page.raw)
	}
	if len(list) == 0 {
		return nil
	}
	return list[0].(map[string]any)
}

// waitDelivered waits for delivery id to be Delivered, failing at once if
// it is made final otherwise, and returns it.
func (ts *tenantSystem) waitDelivered(t *testing.T, id string) map[string]any {
	t.Helper()
	var d apiReply
	testenv.Eventually(t, "delivery "+id+" to be Delivered", func() bool {
		d = ts.acme.expect(t, http.StatusOK, "GET", "/v1/deliveries/"+id, "")
		if d.body["status"] == models.StatusExhausted {
			t.Fatalf("delivery %s is Exhausted, want Delivered: %s", id, d.raw)
		}
		return d.body["status"] == models.StatusDelivered
	})
	return d.body
}

// recover runs homing delivery recover of acme's webhook orders.
func (ts *tenantSystem) recover(t *testing.T) result {
	t.Helper()
	return ts.run(t, "homing", "delivery", "recover", "--tenant", "acme", "--webhook", "orders", "--since", "1h")
}

// An event accepted before its tenant is disabled, and fanned out while it
// is, is kept: a delivery held, Failed with no attempt, while the tenant
// sends nothing (its sweeps skip it, its recover is refused, its publishes
// answered 409 tenant_disabled). Enabled again, the event is delivered
// exactly once. (It used to fan out to nothing, its outbox row released,
// and be lost.)
func TestDisabledTenantsAcceptedEventIsDeliveredOnceEnabled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	rc := testreceiver.New(t)
	ts := newTenantSystem(t, rc)
	db := ts.openDB(t)

	ts.publish(t, http.StatusAccepted, "so-held")
	ts.setEnabled(t, false)
	ts.start("worker", "worker started")
	ts.start("scheduler", "scheduler started")
	var id string
	testenv.Eventually(t, "the disabled tenant's accepted event to be fanned out and kept", func() bool {
		var outbox int64
		if err := db.Model(&models.OutboxEvent{}).Where("tenant = ? AND event_id = ?", "acme", "so-held").Count(&outbox).Error; err != nil {
			t.Fatal(err)
		}
		d := ts.deliveryOf(t, "so-held")
		if d == nil || outbox != 0 {
			return false
		}
		id, _ = d["id"].(string)
		if d["status"] != models.StatusFailed || d["attempts"] != float64(0) {
			t.Fatalf("the disabled tenant's delivery: %v, want Failed with no attempt, held", d)
		}
		return true
	})
	e := ts.publish(t, http.StatusConflict, "so-refused")
	if code := e.body["error"].(map[string]any)["code"]; code != "tenant_disabled" {
		t.Fatalf("publish into a disabled tenant: %s, want 409 tenant_disabled", e.raw)
	}
	if r := ts.recover(t); r.code != 1 || !strings.Contains(r.stderr, "disabled") {
		t.Fatalf("recover while acme is disabled: %s; want exit 1 saying the tenant is disabled", r)
	}
	if n := rc.Count(); n != 0 {
		t.Fatalf("the receiver got %d requests while the tenant was disabled, want 0", n)
	}

	ts.setEnabled(t, true)
	ts.waitDelivered(t, id)
	ts.stop()
	if got := rc.CountBy("webhook-id"); rc.Count() != 1 || got[id] != 1 {
		t.Fatalf("the receiver got %v; want delivery %s exactly once", got, id)
	}
}

// An attempt at the receiver when its tenant is disabled ends with its real
// outcome: the receiver answers 200, the delivery is Delivered, and a
// recover after the enable (the step operators take) requeues and sends
// nothing. One receipt. (The disable used to make it Exhausted, keep the
// 2xx in its history only, and the recover sent it again.)
func TestDisableMidFlightSendsOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	rc := testreceiver.New(t)
	ts := newTenantSystem(t, rc)
	db := ts.openDB(t)
	ts.start("worker", "worker started")
	ts.start("scheduler", "scheduler started")

	release := rc.Hold()
	ts.publish(t, http.StatusAccepted, "so-flight")
	testenv.Eventually(t, "the attempt to reach the receiver", func() bool { return rc.Count() == 1 })
	ts.setEnabled(t, false)
	release()
	d := ts.deliveryOf(t, "so-flight")
	if d == nil {
		t.Fatal("so-flight has no delivery")
	}
	id, _ := d["id"].(string)
	got := ts.waitDelivered(t, id)
	if h, _ := got["history"].([]any); len(h) != 1 {
		t.Fatalf("delivery %s: history %v, want its one attempt", id, got["history"])
	}

	ts.setEnabled(t, true)
	r := ts.recover(t)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "requeued 0 deliveries") {
		t.Fatalf("recover after the enable: %s; want nothing requeued", r)
	}
	var pending int64
	if err := db.Model(&models.Delivery{}).Where("tenant = ? AND status <> ?", "acme", models.StatusDelivered).Count(&pending).Error; err != nil || pending != 0 {
		t.Fatalf("acme has %d deliveries not Delivered (%v), want none: nothing left to send", pending, err)
	}
	ts.stop()
	if n, ids := rc.Count(), rc.CountBy("webhook-id"); n != 1 || ids[id] != 1 {
		t.Fatalf("the receiver got %d requests (%v), want delivery %s once", n, ids, id)
	}
}

// A tenant deleted with --force while its accepted events still wait in
// Redis (no worker has run) takes them with it, so its name, created
// again, starts empty: the new tenant's event of the same ID is delivered
// once, with its own document, and the old tenant's document reaches no
// one. (The old task used to stay queued: the new tenant's webhook got the
// old document, and the new event was taken for a duplicate of it.)
func TestDeletedTenantsQueuedEventsGoWithIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	rc := testreceiver.New(t)
	ts := newTenantSystem(t, rc)
	ropt, err := asynq.ParseRedisURI(envValue(ts.env, "HOMING_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(ropt)
	t.Cleanup(func() { _ = insp.Close() })
	publish := func(owner string) {
		t.Helper()
		ts.acme.expect(t, http.StatusAccepted, "POST", "/v1/events",
			fmt.Sprintf(`{"id": "so-1", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1", "owner": %q}}`, owner))
	}
	taskID := event.TaskID("acme", "so-1")

	publish("the-first-acme")
	testenv.Eventually(t, "the first acme's event to be queued in Redis", func() bool {
		_, err := insp.GetTaskInfo(event.Queue, taskID)
		return err == nil
	})
	ts.op.expect(t, http.StatusNoContent, "DELETE", "/v1/tenants/acme?force=true", "")
	if _, err := insp.GetTaskInfo(event.Queue, taskID); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatalf("the deleted tenant's queued event after delete --force: %v; want it gone from Redis", err)
	}

	ts.createAcme(t, rc)
	publish("the-second-acme")
	ts.start("worker", "worker started")
	var id string
	testenv.Eventually(t, "the second acme's event to have a delivery", func() bool {
		d := ts.deliveryOf(t, "so-1")
		id, _ = d["id"].(string)
		return d != nil
	})
	ts.waitDelivered(t, id)
	ts.stop()
	reqs := rc.Requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "the-second-acme") {
		var bodies []string
		for _, r := range reqs {
			bodies = append(bodies, string(r.Body))
		}
		t.Fatalf("the receiver got %q; want one request, the second acme's document", bodies)
	}
}
