package console

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// pageSize is how many deliveries a list page shows.
const pageSize = 50

// filterParams are the deliveries page's filters, named as the API's
// GET /v1/deliveries names them.
var filterParams = []string{"status", "webhook", "doc_type", "doc_name", "event_id", "since", "until", "cursor"}

// deliveries is GET /console/deliveries: the API's listing, a page at a time.
// Its since and until come from the form's date pickers (datetime-local,
// taken as UTC) or, in links and bookmarks, as the API's RFC 3339; either
// is read into the same filter.
func (c *Console) deliveries(w http.ResponseWriter, r *http.Request, s session) {
	q := map[string]string{}
	for _, p := range filterParams {
		if v := strings.TrimSpace(r.URL.Query().Get(p)); v != "" {
			q[p] = v
		}
	}
	data := struct {
		Q        map[string]string
		Statuses []string
		// Choices fill the webhook and doctype pickers; a value typed into
		// the query string that is not among them is offered too (pick).
		Choices inspect.FilterChoices
		// Times are since and until as the date pickers show them.
		Times map[string]pickerTime
		Page  inspect.Page
		// Rows are the page's deliveries with their state in words.
		Rows  []deliveryRow
		Next  string
		Error string
		// Activity, on the first page without filters, is the 24 h chart.
		Activity *inspect.Activity
	}{Q: q, Statuses: inspect.Statuses}
	if len(q) == 0 {
		act, err := inspect.ReadActivity(r.Context(), c.cfg.DB, tenantOf(r), c.now())
		if err != nil {
			c.fail(w, r, err)
			return
		}
		data.Activity = &act
	}
	var err error
	if data.Choices, err = inspect.ReadFilterChoices(r.Context(), c.cfg.DB, tenantOf(r)); err != nil {
		c.fail(w, r, err)
		return
	}
	var f inspect.Filter
	f, data.Times, err = parseFilter(q)
	if err == nil {
		f.Limit = pageSize
		data.Page, err = inspect.ListPage(r.Context(), c.cfg.DB, tenantOf(r), f)
	}
	var pe *inspect.ParamError
	switch {
	case errors.As(err, &pe):
		data.Error = pe.Message
	case errors.Is(err, inspect.ErrBadCursor):
		data.Error = "that page link is no longer valid: start again from the first page"
	case err != nil:
		c.fail(w, r, err)
		return
	}
	if data.Rows, err = c.rows(r, data.Page.Deliveries); err != nil {
		c.fail(w, r, err)
		return
	}
	if data.Page.NextCursor != nil {
		next := url.Values{}
		for k, v := range q {
			next.Set(k, v)
		}
		next.Set("cursor", *data.Page.NextCursor)
		data.Next = s.base + "deliveries?" + next.Encode()
	}
	status := http.StatusOK
	if data.Error != "" {
		status = http.StatusBadRequest
	}
	c.render(w, r, status, "deliveries", view{Title: "Deliveries", CSRF: s.csrf, Token: s.token.Name, Now: c.now(), Data: data})
}

// parseFilter reads the page's query q with the API's parser, which reads
// RFC 3339 times only: a date picker's since or until (parseTime) becomes
// the same instant in RFC 3339 before it, so a picked time and the API's
// list the same rows. It returns the times as the pickers show them too.
func parseFilter(q map[string]string) (inspect.Filter, map[string]pickerTime, error) {
	parsed, times := maps.Clone(q), map[string]pickerTime{}
	for _, p := range []string{"since", "until"} {
		v, ok := q[p]
		if !ok {
			continue
		}
		t, err := parseTime(p, v)
		if err != nil {
			return inspect.Filter{}, times, &inspect.ParamError{Param: p, Message: err.Error()}
		}
		parsed[p] = t.Format(time.RFC3339Nano)
		times[p] = pickerTimeOf(t)
	}
	f, err := inspect.ParseFilter(parsed)
	return f, times, err
}

// pickerTime is a time as a datetime-local input shows it, in UTC: to the
// minute when it has no seconds (the picker's default step, 60 s), else to
// the second, or the millisecond (the finest a picker holds), with the Step
// that lets the browser submit it as it is.
type pickerTime struct {
	Value, Step string
}

func pickerTimeOf(t time.Time) pickerTime {
	t = t.UTC()
	switch {
	case t.Nanosecond() != 0:
		return pickerTime{Value: t.Format("2006-01-02T15:04:05.000"), Step: "0.001"}
	case t.Second() != 0:
		return pickerTime{Value: t.Format("2006-01-02T15:04:05"), Step: "1"}
	}
	return pickerTime{Value: t.Format("2006-01-02T15:04")}
}

// pick is the options of a picker: choices, and value too when it is not
// one of them (a webhook since deleted, a doctype typed into a link), so
// that the filter the page shows is the one it applied.
func pick(choices []string, value string) []string {
	if value == "" || slices.Contains(choices, value) {
		return choices
	}
	return append([]string{value}, choices...)
}

// deliveryRow is a delivery of a list with its state in words.
type deliveryRow struct {
	inspect.Delivery
	Words string
}

// rows says the state of each of ds in words (inspect.Words), reading once
// what holds the session tenant's deliveries back, and which of ds wait
// for an earlier delivery of their document.
func (c *Console) rows(r *http.Request, ds []inspect.Delivery) ([]deliveryRow, error) {
	holds, err := inspect.ReadHolds(r.Context(), c.cfg.DB, tenantOf(r), ds)
	if err != nil {
		return nil, err
	}
	now := c.now()
	out := make([]deliveryRow, len(ds))
	for i, d := range ds {
		out[i] = deliveryRow{Delivery: d, Words: inspect.Words(inspect.StandingOf(d, holds.Of(d)), now)}
	}
	return out, nil
}

// deliveryView is the delivery page's data.
type deliveryView struct {
	inspect.Detail
	// Words is its state as a person reads it (inspect.Words).
	Words string
	// AsynqmonLink is the delivery's task in asynqmon, when api.asynqmon_url
	// is set and the delivery has a task.
	AsynqmonLink string
}

// notices are the messages an action's redirect may ask a page to show.
var notices = map[string]string{
	"retried":  "Retry queued: the delivery is Failed and due now; the next sweep sends it.",
	"resent":   "This is a new delivery of the same payload; the next sweep sends it.",
	"enabled":  "Webhook enabled.",
	"disabled": "Webhook disabled: its pending retries are now Exhausted.",
	"created":  "Webhook created.",
	"updated":  "Webhook saved.",
}

// delivery is GET /console/deliveries/{id}.
func (c *Console) delivery(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	d, err := inspect.Show(r.Context(), c.cfg.DB, tenantOf(r), id)
	if errors.Is(err, inspect.ErrNotFound) {
		c.message(w, r, http.StatusNotFound, "Not found", "No delivery "+id+".")
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rows, err := c.rows(r, []inspect.Delivery{d.Delivery})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := deliveryView{Detail: d, Words: rows[0].Words, AsynqmonLink: c.asynqmonLink(r, s, d)}
	if d.WaitsFor != "" || d.WaitsForEvent != "" {
		v.Words = inspect.Words(inspect.StandingOf(d.Delivery, inspect.HeldOrder), c.now())
	}
	c.render(w, r, http.StatusOK, "delivery", view{Title: "Delivery " + id, CSRF: s.csrf, Token: s.token.Name, Now: c.now(),
		Notice: notices[r.URL.Query().Get("notice")], Data: v})
}

// asynqmonLink is d's task in asynqmon: its first attempt's task while it
// has made none, its retry's task while it is Failed; "" otherwise, and ""
// while that task does not exist (a retry not yet queued by the sweeper).
// Only an operator's session links it, never the portal's or a tenant
// token's: asynqmon is the operator's, and shows every tenant's tasks and
// payloads to whoever reaches it.
func (c *Console) asynqmonLink(r *http.Request, s session, d inspect.Detail) string {
	if c.cfg.AsynqmonURL == "" || isPortal(r) || !s.operator {
		return ""
	}
	var id string
	switch {
	case d.Status == models.StatusFailed && d.Attempts > 0:
		id = tasks.RetryTaskID(d.ID)
	case d.Attempts == 0 && d.Status != models.StatusExhausted:
		id = tasks.DeliverTaskID(d.ID)
	default:
		return ""
	}
	queue := tasks.DefaultQueue
	if hook, err := c.cfg.Webhooks.Get(r.Context(), tenantOf(r), d.Webhook); err == nil && hook.Queue != "" {
		queue = hook.Queue
	} else if err != nil && !errors.Is(err, webhook.ErrNotFound) {
		c.log.Warn("console: read webhook for asynqmon link", "webhook", d.Webhook, "error", err.Error())
	}
	if c.cfg.Tasks != nil {
		if _, err := c.cfg.Tasks.GetTaskInfo(queue, id); err != nil {
			if !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
				c.log.Warn("console: look up the task for the asynqmon link", "task_id", id, "error", err.Error())
			}
			return ""
		}
	}
	return strings.TrimRight(c.cfg.AsynqmonURL, "/") + "/queues/" + url.PathEscape(queue) + "/tasks/" + url.PathEscape(id)
}

// retry is POST /console/deliveries/{id}/retry: the API's retry.
func (c *Console) retry(w http.ResponseWriter, r *http.Request, _ session) {
	id := r.PathValue("id")
	err := c.cfg.Recovery.Retry(r.Context(), tenantOf(r), id)
	switch {
	case errors.Is(err, recovery.ErrNotFound):
		c.message(w, r, http.StatusNotFound, "Not found", "No delivery "+id+".")
	case errors.Is(err, recovery.ErrDelivered):
		c.message(w, r, http.StatusConflict, "Not retried", "Delivery "+id+" was delivered; use Resend to send its payload again as a new delivery.")
	case errors.Is(err, recovery.ErrInFlight):
		c.message(w, r, http.StatusConflict, "Not retried", "Delivery "+id+" has an attempt in flight; try again once it is recorded.")
	case errors.Is(err, recovery.ErrNotBuilt), errors.Is(err, tenant.ErrDisabled):
		c.message(w, r, http.StatusConflict, "Not retried", err.Error())
	case err != nil:
		c.fail(w, r, err)
	default:
		http.Redirect(w, r, base(r)+"deliveries/"+url.PathEscape(id)+"?notice=retried", http.StatusSeeOther)
	}
}

// resend is POST /console/deliveries/{id}/resend: the API's resend; the
// browser goes to the new delivery.
func (c *Console) resend(w http.ResponseWriter, r *http.Request, _ session) {
	id := r.PathValue("id")
	newID, err := c.cfg.Recovery.Resend(r.Context(), tenantOf(r), id)
	switch {
	case errors.Is(err, recovery.ErrNotFound):
		c.message(w, r, http.StatusNotFound, "Not found", "No delivery "+id+".")
	case errors.Is(err, recovery.ErrNotBuilt), errors.Is(err, tenant.ErrDisabled):
		c.message(w, r, http.StatusConflict, "Not resent", err.Error())
	case err != nil:
		c.fail(w, r, err)
	default:
		http.Redirect(w, r, base(r)+"deliveries/"+url.PathEscape(newID)+"?notice=resent", http.StatusSeeOther)
	}
}
