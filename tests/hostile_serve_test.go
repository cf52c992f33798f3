package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// maxServeRSS bounds `homing serve`'s peak resident memory (VmHWM) while it
// validates every hostile definition: creation evaluates a definition under
// the same budgets as delivery, in the request's goroutine. The bound of
// the binary users run, which this test runs (system.plain).
const maxServeRSS int64 = 200 << 20

// TestHostileDefinitionsViaServe POSTs the hostile corpus to a real
// `homing serve`: every definition that exceeds a limit with the sample
// document (or whatever the document) is refused with a 4xx naming the
// limit, the others are created without one, and serve stays up under
// maxServeRSS. Serve runs with its time limits out of reach
// (outOfReachTimeLimits): steps and sizes stop every one of these, so each
// meets the limit it names on any machine, never the time limit first.
func TestHostileDefinitionsViaServe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	s := newSystem(t)
	s.plain = true
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = outOfReachTimeLimits(s.env)
	c := s.startAPI(t)
	sample := hostileDoc()
	post := func(t *testing.T, def map[string]any) apiReply {
		t.Helper()
		def["doctype"], def["event"], def["url"] = "Hostile", "on_submit", "http://127.0.0.1:9/"+def["name"].(string)
		b, err := json.Marshal(def)
		if err != nil {
			t.Fatal(err)
		}
		return c.call(t, "POST", "/v1/webhooks", string(b))
	}
	// A definition is refused with a 4xx naming its limit: exactly that,
	// never a 503 for the time limit (which is out of reach here).
	refused := func(t *testing.T, name, want string, r apiReply) {
		t.Helper()
		if r.status < 400 || r.status >= 500 || !strings.Contains(r.raw, want) {
			t.Errorf("POST %s: %d %s\nwant a 4xx naming %q", name, r.status, r.raw, want)
		}
	}

	for _, d := range literalTemplates {
		refused(t, d.name, d.want, post(t, map[string]any{"name": d.name, "template": d.src}))
	}
	for _, d := range literalConditions {
		refused(t, d.name, d.want, post(t, map[string]any{"name": d.name, "condition": d.src}))
	}
	type group struct {
		defs     []struct{ name, src, want string }
		field    string
		language string
	}
	for _, g := range []group{{documentTemplates, "template", ""}, {documentConditions, "condition", "expr"}, {pythonConditions, "condition", "python"}} {
		for _, d := range g.defs {
			def := func(name string) map[string]any {
				m := map[string]any{"name": name, g.field: d.src}
				if g.language != "" {
					m["condition_language"] = g.language
				}
				return m
			}
			withSample := def("sample-" + d.name)
			withSample["sample_doc"] = sample
			refused(t, d.name+" with the sample document", d.want, post(t, withSample))
			if r := post(t, def(d.name)); r.status != http.StatusCreated {
				t.Errorf("POST %s without a sample document: %d %s, want 201 (the empty document exceeds no limit)", d.name, r.status, r.raw)
			}
		}
	}

	var p *process
	for _, q := range s.procs {
		if q.name == "homing" {
			p = q // homing serve, the only one started
		}
	}
	if p == nil {
		t.Fatal("no homing serve process")
	}
	select {
	case <-p.done:
		t.Fatalf("homing serve exited (%v):\n%s", p.err, p.output.String())
	default:
	}
	if rss := peakRSS(t, p.cmd.Process.Pid); rss > maxServeRSS {
		t.Errorf("homing serve's peak RSS %d MiB is over the bound of %d MiB", rss>>20, maxServeRSS>>20)
	} else {
		t.Logf("homing serve's peak RSS: %d MiB", rss>>20)
	}
}
