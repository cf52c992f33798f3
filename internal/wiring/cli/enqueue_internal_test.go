package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Reading --doc - from stdin needs a stdin of the test's own.
func TestEnqueueReadsDocFromStdin(t *testing.T) {
	t.Parallel()
	e := &env{stdin: strings.NewReader(`{"name": "SO-1", "grand_total": 1500}`), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	doc, err := e.readDoc("-")
	if err != nil {
		t.Fatal(err)
	}
	if doc["name"] != "SO-1" || doc["grand_total"] != int64(1500) {
		t.Errorf("doc = %#v", doc)
	}
	e.stdin = strings.NewReader("[]")
	if _, err := e.readDoc("-"); exitCode(err) != exitUsage {
		t.Errorf("a stdin that is not an object: %v (exit %d), want bad usage", err, exitCode(err))
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a":                     "a",
		"a\nb":                  "a; b",
		"redis.url: x\n\n  y\n": "redis.url: x; y",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAfterBareSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  []string
		want string
		ok   bool
	}{
		{[]string{"webhook", "create", "--secret", "s3cret"}, "s3cret", true},
		{[]string{"webhook", "create", "--secret"}, "", false},
		{[]string{"--secret", "a", "--secret", "b"}, "b", true},
		{[]string{"--", "--secret", "a"}, "", false},
		{[]string{"--secret=x", "y"}, "", false},
	} {
		got, ok := afterBareSecret(tc.raw)
		if got != tc.want || ok != tc.ok {
			t.Errorf("afterBareSecret(%q) = %q, %v", tc.raw, got, ok)
		}
	}
}

// --doc and --sample-doc are read as a published document is: 3 an int,
// 1500.0 a float, which compat frappe bodies write as Python does (issue 25).
func TestDocArgKeepsNumberTypes(t *testing.T) {
	t.Parallel()
	doc, err := readDocArg("--doc", `{"qty": 3, "grand_total": 1500.0, "items": [{"qty": 2}]}`)
	if err != nil {
		t.Fatal(err)
	}
	items, _ := doc["items"].([]any)
	if doc["qty"] != int64(3) || doc["grand_total"] != 1500.0 || len(items) != 1 || items[0].(map[string]any)["qty"] != int64(2) {
		t.Errorf("doc = %#v, want qty int64(3), grand_total float64(1500) and items' qty int64(2)", doc)
	}
	for _, bad := range []string{"[]", "null", "not json"} {
		if _, err := readDocArg("--doc", bad); err == nil || !strings.Contains(err.Error(), "--doc") {
			t.Errorf("readDocArg(%q) = %v, want an error naming --doc", bad, err)
		}
	}
}
