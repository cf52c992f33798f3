// Package console is the delivery console that `homing serve` and `homing
// dev` serve at /console/: server-rendered pages (html/template, embedded
// with go:embed, no front-end build) where an operator sees deliveries and
// webhooks and acts on them. It adds no behaviour of its own: every read is
// the inspect package's and every action the webhook or recovery service's,
// the same code the API and the command line run.
//
// An admin API token, posted once to the login form, lives in an HttpOnly,
// SameSite=Strict cookie; every state-changing form carries a CSRF token
// derived from that cookie (auth.go).
package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/lib/httpserve"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/ops/token"
)

//go:embed templates/*.html static/*
var files embed.FS

// Config is what the console runs on: the services the API uses.
type Config struct {
	DB       *gorm.DB
	Webhooks *webhook.Service
	Recovery *recovery.Service
	Tokens   *token.Service
	// AsynqmonURL (api.asynqmon_url) is where asynqmon answers; when set, a
	// delivery with a task links to it there, in the console only: the
	// portal names no internal address.
	AsynqmonURL string
	// Tasks, when set, is asked whether a delivery's task exists before it
	// is linked: a retry's task is made only when the sweeper queues it, so
	// a Failed delivery waiting for its next_retry has none, and asynqmon
	// would answer the link with "task not found". Nil links unchecked.
	Tasks TaskLookup
	// DisableAfter (health.disable_after) is how long a webhook may fail
	// before it is disabled; the webhook page counts it down.
	DisableAfter time.Duration
	// Portal opens the portal links of /portal/open; nil (no secrets.key)
	// opens none.
	Portal *portal.Links
	// Tenants reads tenants (the operator's tenant filter, the portal's
	// frame origins); nil builds one on DB.
	Tenants *tenant.Service
	// Database watches the database for outages: a page the database
	// cannot serve now is a 503 (Console.unavailable), observed here so the
	// outage is logged once and counted with the API's. Nil still answers
	// 503, logging each such page at WARN.
	Database *dbstate.Watcher
	Clock    clock.Clock
	Logger   *slog.Logger
}

// TaskLookup finds a task in Redis; *asynq.Inspector is one.
type TaskLookup interface {
	GetTaskInfo(queue, id string) (*asynq.TaskInfo, error)
}

// Console serves the console's pages. It is an http.Handler for the paths
// under /console/.
type Console struct {
	cfg     Config
	mux     *http.ServeMux
	pages   map[string]*template.Template
	log     *slog.Logger
	tenants *tenant.Service
	// crossOrigin refuses POSTs a browser sends from another site.
	crossOrigin *http.CrossOriginProtection
}

// Prefix is the path the console is served under.
const Prefix = "/console/"

// New builds the console.
func New(cfg Config) *Console {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, mux: http.NewServeMux(), pages: map[string]*template.Template{}, log: cfg.Logger, tenants: cfg.Tenants}
	if c.tenants == nil {
		c.tenants = tenant.New(cfg.DB, cfg.Clock, cfg.Logger)
	}
	c.crossOrigin = httpserve.CrossOrigin("this console", func(w http.ResponseWriter, r *http.Request, msg string) {
		c.message(w, r, http.StatusForbidden, "Refused", msg)
	})
	for _, name := range []string{"login", "overview", "deliveries", "delivery", "webhooks", "webhook", "recover", "message", "webhookform", "secret", "reveal", "try", "switch"} {
		c.pages[name] = template.Must(template.New("layout.html").Funcs(c.funcs()).
			ParseFS(files, "templates/layout.html", "templates/chart.html", "templates/"+name+".html"))
	}
	static, _ := fs.Sub(files, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/login", c.loginForm)
	c.mux.HandleFunc("POST /console/login", c.sameOrigin(c.login))
	c.mux.HandleFunc("POST /console/tenant", c.action(c.chooseTenant))
	c.mux.HandleFunc("GET /portal/open", c.openLink)
	c.mux.HandleFunc("GET "+accentPath+"{file}", accentCSS)
	c.mux.HandleFunc("POST /portal/open", c.sameOrigin(c.switchLink))
	// One set of pages for the console and the portal: the session decides
	// the tenant (tenantOf), the prefix only which cookie names the session.
	for _, p := range []string{Prefix, PortalPrefix} {
		c.mux.HandleFunc("POST "+p+"logout", c.action(c.logout))
		c.mux.HandleFunc("GET "+p+"{$}", c.page(c.overview))
		c.mux.HandleFunc("GET "+p+"deliveries", c.page(c.deliveries))
		c.mux.HandleFunc("GET "+p+"deliveries/{id}", c.page(c.delivery))
		c.mux.HandleFunc("POST "+p+"deliveries/{id}/retry", c.action(c.retry))
		c.mux.HandleFunc("POST "+p+"deliveries/{id}/resend", c.action(c.resend))
		c.mux.HandleFunc("GET "+p+"webhooks", c.page(c.webhooks))
		c.mux.HandleFunc("GET "+p+"webhooks/{name}", c.page(c.webhook))
		c.mux.HandleFunc("GET "+p+"new-webhook", c.page(c.newWebhook))
		c.mux.HandleFunc("POST "+p+"webhooks", c.action(c.createWebhook))
		c.mux.HandleFunc("GET "+p+"webhooks/{name}/edit", c.page(c.editWebhook))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}", c.action(c.updateWebhook))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/rotate-secret", c.action(c.rotateSecret))
		c.mux.HandleFunc("GET "+p+"webhooks/{name}/secret", c.page(c.revealForm))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/secret", c.action(c.revealSecret))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/preview", c.action(c.previewWebhook))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/test", c.action(c.testWebhook))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/enable", c.action(c.enable))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/disable", c.action(c.disable))
		c.mux.HandleFunc("POST "+p+"webhooks/{name}/recover", c.action(c.recoverWebhook))
	}
	return c
}

// ServeHTTP answers a request under /console/ or /portal/. No page may be
// framed, except a portal session's by its tenant's portal_origins (set
// once the session's tenant is known, frameAncestors).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", csp(nil, ""))
	c.mux.ServeHTTP(w, r)
}

func (c *Console) now() time.Time { return c.cfg.Clock.Now().UTC() }

// view is what every page's template gets: the page's own data and what the
// layout needs.
type view struct {
	Title string
	CSRF  string
	Token string // the signed-in token's name
	// Base is the prefix of the pages' links: /console/ or /portal/.
	Base string
	// Tenant is the tenant the session sees; Tenants, for an operator's
	// session only, those it may choose instead.
	Tenant  string
	Tenants []string
	Portal  bool
	// Theme is a portal page's tenant's theme: its product name, logo,
	// accent colour and support link instead of Homing's.
	Theme   tenant.Theme
	Now     time.Time
	Refresh int // seconds; 0 does not refresh
	// Page is the template's name, which the navigation marks as current.
	Page   string
	Notice string
	Data   any
}

// render writes page name with v, or a 500 if the template fails. What
// the layout needs of the session (its CSRF value, token, prefix and
// tenant) comes from r's session.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	s, _ := sessionOf(r.Context())
	v.CSRF, v.Token, v.Tenant, v.Base, v.Portal, v.Page = s.csrf, s.token.Name, s.tenant, s.base, isPortal(r), name
	if v.Portal {
		v.Theme = s.theme
	}
	if v.Base == "" {
		v.Base = Prefix
		if v.Portal {
			v.Base = PortalPrefix
		}
	}
	if s.operator && !v.Portal {
		list, err := c.tenants.List(r.Context())
		if err != nil {
			c.log.Warn("console: list tenants for the tenant filter", "error", err.Error())
		}
		for _, t := range list {
			v.Tenants = append(v.Tenants, t.Name)
		}
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, v); err != nil {
		c.log.Error("console: render page", "page", name, "error", err.Error())
		http.Error(w, "the console could not render this page; see the serve log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// message renders a page that only says something (an error, a refusal).
func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	c.render(w, r, status, "message", view{Title: title, Now: c.now(), Data: text})
}

// funcs are the templates' helpers.
func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		// seg escapes a name for one segment of a link's path: a webhook
		// named "a/../../b" links to its own page, not to another.
		"seg":    url.PathEscape,
		"rel":    relative,
		"utc":    formatUTC,
		"pretty": prettyJSON,
		"pct": func(f *float64) string {
			if f == nil {
				return "–"
			}
			return fmt.Sprintf("%.1f%%", *f*100)
		},
		"deref": func(p *int) string {
			if p == nil {
				return ""
			}
			return fmt.Sprint(*p)
		},
		"dur":       latency,
		"lower":     strings.ToLower,
		"list":      func(v ...string) []string { return v },
		"bars":      bars,
		"hourTicks": hourTicks,
		"current":   current,
		"pick":      pick,
		// word names a status in a person's words (inspect.StatusWord).
		"word": inspect.StatusWord,
		// accentCSS is the stylesheet of a theme's accent colour.
		"accentCSS": func(color string) string { return accentPath + strings.TrimPrefix(color, "#") + ".css" },
	}
}

// bar is one hour of a chart: its deliveries drawn up from the baseline
// (y 40 of 80) and its failed attempts down from it, so the two differ by
// place as well as by colour, under a tooltip with both counts.
type bar struct {
	// X is where the hour's column starts (10 wide), BX its bars.
	X, BX int
	// DY and DH are the deliveries bar's top and height, FH the failures
	// bar's height below the line.
	DY, DH, FH int
	// Label is the hour in UTC, "14:00–15:00".
	Label                string
	Deliveries, Failures int64
}

// barHeight is the tallest bar, up or down: 38 of the chart's 80.
const barHeight = 38

// bars draws the hours of an activity chart that starts at start, scaled
// to max: barHeight is max, and any count above zero is at least 1, so one
// failure still shows.
func bars(hours [inspect.ActivityHours]inspect.Hour, max int64, start time.Time) []bar {
	height := func(n int64) int {
		if n <= 0 || max <= 0 {
			return 0
		}
		return int(max64(1, n*barHeight/max))
	}
	out := make([]bar, len(hours))
	for i, h := range hours {
		at := start.UTC().Add(time.Duration(i) * time.Hour)
		dh := height(h.Deliveries)
		out[i] = bar{X: i * 10, BX: i*10 + 2, DY: 40 - dh, DH: dh, FH: height(h.Failures),
			Label: at.Format("15:04") + "–" + at.Add(time.Hour).Format("15:04"), Deliveries: h.Deliveries, Failures: h.Failures}
	}
	return out
}

// tick is one hour under a chart; the Major ones, every third hour, are
// labelled, and on a narrow screen only those of every sixth (Six).
type tick struct {
	Label      string
	Major, Six bool
}

// hourTicks are the chart's hour labels from start, in UTC.
func hourTicks(start time.Time) []tick {
	out := make([]tick, inspect.ActivityHours)
	for i := range out {
		at := start.UTC().Add(time.Duration(i) * time.Hour)
		out[i] = tick{Label: at.Format("15:04"), Major: at.Hour()%3 == 0, Six: at.Hour()%6 == 0}
	}
	return out
}

// current marks the navigation's link to page's section: aria-current
// "page" on the section's own page (its first name), "true" on a page
// within it (a delivery within Deliveries), nothing elsewhere.
func current(page string, section ...string) template.HTMLAttr {
	for i, s := range section {
		if s != page {
			continue
		}
		if i == 0 {
			return ` aria-current="page"`
		}
		return ` aria-current="true"`
	}
	return ""
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// relative says when t is from now: "in 4m", "3h ago", "now".
func relative(now time.Time, t any) string {
	var at time.Time
	switch v := t.(type) {
	case time.Time:
		at = v
	case *time.Time:
		if v == nil {
			return ""
		}
		at = *v
	default:
		return ""
	}
	d := at.Sub(now)
	if d > -time.Second && d < time.Second {
		return "now"
	}
	if d > 0 {
		return "in " + short(d)
	}
	return short(-d) + " ago"
}

// short is d in its largest whole unit, with the next one: 4m, 2h5m, 3d4h.
func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	default:
		days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
		if h == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h)
	}
}

func formatUTC(t any) string {
	switch v := t.(type) {
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v == nil {
			return ""
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	}
	return ""
}

// prettyJSON indents s when it is JSON and returns it unchanged otherwise.
func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

// latency reads a latency for a person: milliseconds under a second, then
// seconds, minutes, hours; a dash when there is none.
func latency(d *time.Duration) string {
	switch {
	case d == nil:
		return "–"
	case *d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case *d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}
