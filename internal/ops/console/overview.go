package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/homingdev/homing/internal/intake/dbstate"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/inspect"
)

// overviewRefresh is how often the overview reloads itself, in seconds.
const overviewRefresh = 10

// overview is GET /console/: recent counts, backlogs and troubled webhooks.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, s session) {
	o, err := inspect.ReadOverview(r.Context(), c.cfg.DB, tenantOf(r), c.now())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	act, err := inspect.ReadActivity(r.Context(), c.cfg.DB, tenantOf(r), c.now())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// An operator's console session sees every tenant at a glance.
	var tenants []inspect.TenantCount
	if s.operator && !isPortal(r) {
		if tenants, err = inspect.ReadTenantCounts(r.Context(), c.cfg.DB, c.now()); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Now: o.At,
		Refresh: overviewRefresh, Data: struct {
			inspect.Overview
			Statuses []string
			Activity *inspect.Activity
			Tenants  []inspect.TenantCount
		}{o, inspect.Statuses, &act, tenants}})
}

// fail renders an error a page met: one of a database that cannot serve
// it now as a 503 page (unavailable), anything else as a 500 page, logged.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	if c.unavailable(w, r, err) || c.overRate(w, r, err) {
		return
	}
	c.log.Error("console", "path", r.URL.Path, "error", err.Error())
	c.message(w, r, http.StatusInternalServerError, "Error", err.Error())
}

// overRate answers an action refused for its tenant's action_rate (a
// resend, a retry, a recover, a test send: tenant.ActionRateError) as the
// API does: 429 with Retry-After, on a page saying so. It reports whether
// err was one.
func (c *Console) overRate(w http.ResponseWriter, r *http.Request, err error) bool {
	var are *tenant.ActionRateError
	if !errors.As(err, &are) {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(are.RetryAfter.Seconds()))))
	c.message(w, r, http.StatusTooManyRequests, "Not now", are.Error())
	return true
}

// unavailable answers a request the database could not serve now (dbstate's
// retryable kinds: unreachable, read-only in a failover, timed out, busy)
// as the API answers database_unavailable: 503 with Retry-After, on a page
// that says so, never a 500. The error is observed by the database watcher,
// so an outage is logged once (its ERROR line) and counted, not once per
// page. It reports whether err was one.
//
// What can now happen twice? A form whose commit succeeded but whose answer
// was lost with the connection (a resend, a recovery) may be sent again by
// an operator who reads this page; the page says to look first.
func (c *Console) unavailable(w http.ResponseWriter, r *http.Request, err error) bool {
	kind := c.cfg.Database.Observe(err)
	if !kind.Retryable() {
		return false
	}
	if kind.Outage() && c.cfg.Database != nil {
		c.log.Debug("console: page refused: database away", "method", r.Method, "path", r.URL.Path, "kind", string(kind), "error", err.Error())
	} else {
		c.log.Warn("console: page refused: database "+string(kind), "method", r.Method, "path", r.URL.Path, "kind", string(kind), "error", err.Error())
	}
	after := int(dbstate.RetryAfter / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(after))
	text := fmt.Sprintf("This page cannot be shown now: %s. Nothing is lost: deliveries wait in the database and are sent when it is back. Reload in %d seconds or so.", kind.Explain(), after)
	if r.Method == http.MethodPost {
		text = fmt.Sprintf("This form could not be completed: %s. It may or may not have taken effect before the database went away: look before you send it again, in %d seconds or so.", kind.Explain(), after)
	}
	c.message(w, r, http.StatusServiceUnavailable, "Database unavailable", text)
	return true
}
