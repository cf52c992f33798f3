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
