package console

import (
	"net/http"

	"github.com/homingdev/homing/inspect"
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

// fail renders an unexpected error as a 500 page and logs it.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.Error("console", "path", r.URL.Path, "error", err.Error())
	c.message(w, r, http.StatusInternalServerError, "Error", err.Error())
}
