package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/recovery"
)

// healthWindow is the window of a webhook page's success rate.
const healthWindow = 24 * time.Hour

// webhooks is GET /console/webhooks: every webhook with its health.
func (c *Console) webhooks(w http.ResponseWriter, r *http.Request, s session) {
	hooks, err := c.cfg.Webhooks.List(r.Context(), tenantOf(r))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	views := make([]webhook.View, 0, len(hooks))
	for _, h := range hooks {
		v := webhook.ViewOf(h)
		hl, err := c.cfg.Webhooks.Health(r.Context(), h)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		v.Health = &hl
		views = append(views, v)
	}
	c.render(w, r, http.StatusOK, "webhooks", view{Title: "Webhooks", CSRF: s.csrf, Token: s.token.Name, Now: c.now(), Data: views})
}

// webhookView is the webhook page's data.
type webhookView struct {
	webhook.View
	Rate inspect.SuccessRate
	// Latency is the latency users feel over the same window.
	Latency   inspect.Latency
	LastError string
	// DisablesAt is when health.disable_after disables a failing webhook.
	DisablesAt *time.Time
	// Since is the recover form's default: a day ago.
	Since string
	// Simple hides the operator's settings: a portal whose tenant's
	// portal_advanced is off.
	Simple bool
}

// simple reports whether r's pages hide the operator's settings of a
// webhook: a portal's, unless its tenant's portal_advanced is on.
func (c *Console) simple(r *http.Request) (bool, error) {
	if !isPortal(r) {
		return false, nil
	}
	t, err := c.tenants.Get(r.Context(), tenantOf(r))
	return !t.PortalAdvanced, err
}

// webhook is GET /console/webhooks/{name}.
func (c *Console) webhook(w http.ResponseWriter, r *http.Request, s session) {
	v, ok := c.webhookView(w, r)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "webhook", view{Title: "Webhook " + v.Name, CSRF: s.csrf, Token: s.token.Name, Now: c.now(),
		Notice: notices[r.URL.Query().Get("notice")], Data: v})
}

// webhookView reads webhook {name}'s page data, or answers the request
// itself (404, 500) and returns false.
func (c *Console) webhookView(w http.ResponseWriter, r *http.Request) (webhookView, bool) {
	name := r.PathValue("name")
	hook, err := c.cfg.Webhooks.Get(r.Context(), tenantOf(r), name)
	if errors.Is(err, webhook.ErrNotFound) {
		c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
		return webhookView{}, false
	}
	if err != nil {
		c.fail(w, r, err)
		return webhookView{}, false
	}
	v := webhookView{View: webhook.ViewOf(hook), Since: c.now().Add(-24 * time.Hour).Format("2006-01-02T15:04")}
	hl, err := c.cfg.Webhooks.Health(r.Context(), hook)
	if err == nil {
		v.Health = &hl
		v.Rate, err = inspect.WebhookSuccessRate(r.Context(), c.cfg.DB, tenantOf(r), name, c.now(), healthWindow)
	}
	if err == nil {
		v.Latency, err = inspect.WebhookLatency(r.Context(), c.cfg.DB, tenantOf(r), name, c.now(), healthWindow)
	}
	if err == nil {
		v.LastError, err = inspect.LastError(r.Context(), c.cfg.DB, tenantOf(r), name)
	}
	if err == nil {
		v.Simple, err = c.simple(r)
	}
	if err != nil {
		c.fail(w, r, err)
		return webhookView{}, false
	}
	if hook.Enabled && hl.FailingSince != nil && c.cfg.DisableAfter > 0 {
		t := hl.FailingSince.Add(c.cfg.DisableAfter).UTC()
		v.DisablesAt = &t
	}
	return v, true
}

// enable is POST /console/webhooks/{name}/enable.
func (c *Console) enable(w http.ResponseWriter, r *http.Request, s session) {
	c.setEnabled(w, r, true, "")
}

// disable is POST /console/webhooks/{name}/disable.
func (c *Console) disable(w http.ResponseWriter, r *http.Request, s session) {
	c.setEnabled(w, r, false, "disabled in the console by token "+s.token.Name)
}

// setEnabled is the webhook service's SetEnabled, as `homing webhook
// enable/disable` and the API's PATCH run it.
func (c *Console) setEnabled(w http.ResponseWriter, r *http.Request, enabled bool, reason string) {
	name := r.PathValue("name")
	_, err := c.cfg.Webhooks.SetEnabled(r.Context(), tenantOf(r), name, enabled, reason)
	if errors.Is(err, webhook.ErrNotFound) {
		c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	notice := "enabled"
	if !enabled {
		notice = "disabled"
	}
	http.Redirect(w, r, base(r)+"webhooks/"+url.PathEscape(name)+"?notice="+notice, http.StatusSeeOther)
}

// recoverResult is the recover page's data.
type recoverResult struct {
	Webhook string
	Since   string
	Status  string
	// Ran is false for the dry run (Count is how many would be requeued)
	// and true once run (Requeued of Count were).
	Ran      bool
	Count    int64
	Requeued int64
	Batches  []int64
}

// Which names the statuses recovered in words: the one chosen, or both.
func (r recoverResult) Which() string {
	var words []string
	for _, st := range (recovery.Filter{Status: r.Status}).Statuses() {
		words = append(words, strings.ToLower(inspect.StatusWord(st)))
	}
	return strings.Join(words, " or ")
}

// recoverWebhook is POST /console/webhooks/{name}/recover: with step=count
// the dry run's count, and a button to run it; with step=run the recovery
// itself, shown with the running count after every batch.
func (c *Console) recoverWebhook(w http.ResponseWriter, r *http.Request, s session) {
	name := r.PathValue("name")
	if _, err := c.cfg.Webhooks.Get(r.Context(), tenantOf(r), name); err != nil {
		if errors.Is(err, webhook.ErrNotFound) {
			c.message(w, r, http.StatusNotFound, "Not found", "No webhook "+name+".")
			return
		}
		c.fail(w, r, err)
		return
	}
	res := recoverResult{Webhook: name, Since: r.PostFormValue("since"), Status: r.PostFormValue("status")}
	since, err := parseSince(res.Since)
	if err == nil && !since.Before(c.now()) {
		err = errors.New("since " + res.Since + " is not in the past")
	}
	if err != nil {
		c.message(w, r, http.StatusBadRequest, "Not recovered", err.Error())
		return
	}
	f := recovery.Filter{Webhook: name, Since: c.now().Sub(since), Status: res.Status}
	if r.PostFormValue("step") != "run" {
		res.Count, err = c.cfg.Recovery.Recover(r.Context(), tenantOf(r), f, true, nil)
	} else {
		res.Ran = true
		res.Requeued, err = c.cfg.Recovery.Recover(r.Context(), tenantOf(r), f, false, func(done, total int64) {
			res.Count = total
			res.Batches = append(res.Batches, done)
		})
		if res.Count == 0 {
			res.Count = res.Requeued
		}
		c.log.Info("console: recovered", "webhook", name, "since", since.Format(time.RFC3339), "status", res.Status, "requeued", res.Requeued, "token", s.token.Name)
	}
	switch {
	case errors.Is(err, tenant.ErrDisabled):
		c.message(w, r, http.StatusConflict, "Not recovered", err.Error())
		return
	case c.overRate(w, r, err):
		return
	case err != nil:
		c.message(w, r, http.StatusBadRequest, "Not recovered", err.Error())
		return
	}
	c.render(w, r, http.StatusOK, "recover", view{Title: "Recover " + name, CSRF: s.csrf, Token: s.token.Name, Now: c.now(), Data: res})
}

// parseSince reads the recover form's time (parseTime).
func parseSince(v string) (time.Time, error) { return parseTime("since", v) }

// parseTime reads a time a page was given, named name: a date picker's
// datetime-local value (to the minute, second or fraction), which is taken
// as UTC, or an RFC 3339 time (a link's, the API's).
func parseTime(name, v string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New(name + " " + `"` + v + `"` + " is not a time such as 2026-12-03T15:04 (UTC) or 2026-12-03T15:04:05Z")
}
