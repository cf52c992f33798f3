package delivery

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/intake/event"
)

const numbersCorpus = "testdata/frappe_numbers"

// numberCase is one case of testdata/frappe_numbers/cases.json: a body
// template, or data rows as [fieldname, key] pairs.
type numberCase struct {
	Name     string      `json:"name"`
	Template string      `json:"template"`
	Fields   [][2]string `json:"fields"`
}

// Frappe reads a document with json.loads, so 3 stays an int and 1500.0 a
// float through every template, filter and data row. Each case of
// cases.json, built for doc.json as the worker decodes it, must be the
// bytes expected.py works out with jinja2 and Python's json (expected.json):
// loops over child rows, ifs on 0/1 check fields, json, tojson, sum,
// arithmetic, Frappe's filters, numbers as text, and data rows.
func TestFrappeNumbersAsPython(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(numbersCorpus, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var cases []numberCase
	if err := json.Unmarshal(read("cases.json"), &cases); err != nil {
		t.Fatal(err)
	}
	var expected []struct {
		Name string `json:"name"`
		Body string `json:"body"`
	}
	if err := json.Unmarshal(read("expected.json"), &expected); err != nil {
		t.Fatal(err)
	}
	if len(expected) != len(cases) {
		t.Fatalf("expected.json has %d cases, cases.json %d: run python3 expected.py > expected.json", len(expected), len(cases))
	}
	doc, err := event.DecodeDoc(read("doc.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		spec := Spec{Compat: template.CompatFrappe, Template: c.Template}
		for _, f := range c.Fields {
			spec.Fields = append(spec.Fields, Field{Fieldname: f[0], Key: f[1]})
		}
		body, _, err := Build(untimed(spec), doc)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if want := expected[i].Body; string(body) != want {
			t.Errorf("%s:\n got %s\nwant %s", c.Name, body, want)
		}
	}
}

// expected.json is what expected.py writes today, when python3 and jinja2
// are there to run it.
func TestFrappeNumbersExpectedIsCurrent(t *testing.T) {
	t.Parallel()
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skip("python3 with jinja2 is not installed:", err)
	}
	cmd := exec.Command("python3", "expected.py")
	cmd.Dir = numbersCorpus
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("expected.py: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(numbersCorpus, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("expected.json is not what expected.py writes: run python3 expected.py > expected.json in %s", numbersCorpus)
	}
}
