package template

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/python"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/gonja/exec"
)

// CompatFrappe selects Frappe's wire behaviour for a webhook
// (delivery.Spec.Compat, RenderURL's compat).
const CompatFrappe = "frappe"

// frappeHelpers are the frappe.utils functions a Frappe template or
// condition may call, reachable as frappe.utils.X and utils.X
// (frappe/integrations/doctype/webhook/webhook.py, get_context:
// {"doc": doc, "utils": get_safe_globals().get("frappe").get("utils")}).
// They need no database. Dates are the server's UTC clock: Frappe uses the
// site's time zone (System Settings), which Homing does not know.
var frappeHelpers = []string{"nowdate", "now", "getdate", "add_days", "date_diff", "format_date", "format_datetime", "fmt_money", "format_value", "flt", "cint", "cstr"}

// frappeDatabaseHelpers read Frappe's database, which Homing cannot reach.
var frappeDatabaseHelpers = regexp.MustCompile(`\bfrappe\s*\.\s*(db|get_doc|get_cached_doc|get_list|get_all|get_value|get_single_value|get_cached_value|call|session|get_meta|render_template|get_hooks|local)\b`)

// templateTags are a template's {{ }} and {% %} tags.
var templateTags = regexp.MustCompile(`(?s)\{\{.*?\}\}|\{%.*?%\}`)

// frappeNames are the frappe.X and utils.X names a template uses.
var frappeNames = regexp.MustCompile(`\b(frappe\s*\.\s*utils|frappe|utils)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)`)

// refuseDatabaseHelpers refuses, at creation, a Frappe template or
// condition calling what needs Frappe's database or an unknown helper,
// which Frappe would have run and Homing would render as None.
func refuseDatabaseHelpers(template string) error {
	// Only what is inside tags is code: "https://frappe.io" in the text is not.
	src := strings.Join(templateTags.FindAllString(template, -1), " ")
	if m := frappeDatabaseHelpers.FindStringSubmatch(src); m != nil {
		return send.Unbuildable("template: frappe.%s reads Frappe's database, which Homing cannot reach (it has only the event's document): put the value into the document Frappe publishes, or compute it in Frappe", m[1])
	}
	for _, m := range frappeNames.FindAllStringSubmatch(src, -1) {
		if strings.ReplaceAll(m[1], " ", "") == "frappe" && m[2] == "utils" {
			continue
		}
		if !slices.Contains(frappeHelpers, m[2]) {
			return send.Unbuildable("template: %s.%s is not one of the frappe.utils helpers Homing has (%s)", strings.ReplaceAll(m[1], " ", ""), m[2], strings.Join(frappeHelpers, ", "))
		}
	}
	return nil
}

// frappeEnv is the environment of Frappe templates.
// Its helpers stand for the names at parse time; each render puts in their
// place helpers that read the render's own time (Globals).
var frappeEnv = sync.OnceValue(func() *exec.Environment {
	return buildEnv(python.Filters(), python.Globals(time.Time{}))
})

// ValidateFrappe parses src as a Frappe template.
func ValidateFrappe(src string) (err error) {
	defer recoverInto(&err)
	_, err = parseTemplateAs(src, true)
	return err
}

// RenderFrappe renders src as Frappe's Jinja would, under the
// same limits as every template (limit, in this goroutine;
// MaxRenderSteps; RenderMemoryFactor × maxBytes of values).
func RenderFrappe(src string, doc map[string]any, maxBytes int, now time.Time, limit time.Duration) (body []byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	defer recoverInto(&err)
	return render(ctx, src, doc, maxBytes, limit, renderMode{text: true, keepFloats: true, frappe: true, now: now})
}
