// Package internal_test holds the rule the folders under internal/ stand for:
// each layer imports only the layers below it (docs/architecture.md, "The
// tree"). The Go compiler already refuses a cycle; this refuses an arrow that
// points back up, which the compiler allows.
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/homingdev/homing"

// layers ranks every folder of the module from the ground up. A package may
// import packages of its own rank or lower. A folder not listed takes the
// rank of its longest listed prefix.
var layers = []struct {
	prefix string
	rank   int
}{
	{"internal/lib", 0},   // building blocks with no Homing concept
	{"internal/gonja", 0}, // the template engine's fork
	{"models", 1},
	{"config", 1},
	{"internal/intake", 2}, // events, the outbox, the connections beneath
	{"client", 3},          // what services import
	{"internal/engine", 4}, // the delivery lifecycle
	{"tasks", 5},           // asynq task types, handlers and the schedule
	{"internal/ops", 6},    // operating it: API, console, views, metrics
	{"internal/wiring", 7}, // the processes and the CLI
	{"transition", 7},      // workflow_transition for Go publishers: builds an app
	{"cmd", 8},
	{"internal/testing", 9}, // test support and the benchmark harness
	{"tests", 9},
	{"deploy", 9},
}

func rank(pkg string) (int, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	best, r := -1, 0
	for _, l := range layers {
		if (rel == l.prefix || strings.HasPrefix(rel, l.prefix+"/")) && len(l.prefix) > best {
			best, r = len(l.prefix), l.rank
		}
	}
	return r, best >= 0
}

func TestNoArrowPointsBackUp(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 30 {
		t.Fatalf("go list named %d packages; want the whole module", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		from := fields[0]
		if from == module+"/internal" {
			continue // this test's own package
		}
		rf, ok := rank(from)
		if !ok {
			t.Errorf("%s is in no layer: add its folder to layers (and to docs/architecture.md)", from)
			continue
		}
		for _, to := range fields[1:] {
			if to != module && !strings.HasPrefix(to, module+"/") {
				continue
			}
			if rt, _ := rank(to); rt > rf {
				t.Errorf("%s imports %s, a layer above it (%d > %d): move the shared part down, or pass it in", from, to, rt, rf)
			}
		}
	}
}

// TestRankReadsTheLongestPrefix pins how a folder is ranked, so that the rule
// above cannot pass by ranking everything alike.
func TestRankReadsTheLongestPrefix(t *testing.T) {
	for pkg, want := range map[string]int{
		module + "/internal/lib/clock":               0,
		module + "/internal/intake/event":            2,
		module + "/internal/engine/dispatch/storage": 4,
		module + "/internal/ops/api":                 6,
		module + "/internal/wiring/cli":              7,
		module + "/internal/testing/testenv":         9,
		module + "/client":                           3,
		module + "/clientele":                        -1,
	} {
		got, ok := rank(pkg)
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("rank(%s) = %d, want %d", pkg, got, want)
		}
	}
}
