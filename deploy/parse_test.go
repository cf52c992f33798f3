package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the module root: go test runs in the package directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repo root %s: %v", root, err)
	}
	return root
}

// readFile returns the text of a file under the repo root, by slash path.
func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlDoc is one document of a (possibly multi-document) YAML file.
type yamlDoc struct {
	file  string // slash path relative to the repo root
	index int    // 0-based position in the file
	v     map[string]any
}

func (d yamlDoc) String() string { return fmt.Sprintf("%s (document %d)", d.file, d.index+1) }

// deployYAML parses every *.yaml and *.yml under deploy/; a file that does
// not parse fails the test.
func deployYAML(t *testing.T) []yamlDoc {
	t.Helper()
	root := repoRoot(t)
	var docs []yamlDoc
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var v map[string]any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: document %d: %w", rel, i+1, err)
			}
			if v != nil {
				docs = append(docs, yamlDoc{file: rel, index: i, v: v})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no YAML documents under deploy/")
	}
	return docs
}

// get walks nested maps (and lists, by decimal index) along path; nil when
// any step is missing.
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func getMap(v any, path ...string) map[string]any {
	m, _ := get(v, path...).(map[string]any)
	return m
}

func getList(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func getString(v any, path ...string) string {
	switch x := get(v, path...).(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// getInt reads a YAML integer; ok is false when absent or not a number.
func getInt(v any, path ...string) (int, bool) {
	switch x := get(v, path...).(type) {
	case int:
		return x, true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// stringList reads a command: a YAML list of words or, as compose allows,
// one string split like a shell would.
func stringList(t *testing.T, v any) []string {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		words, err := shellWords(x)
		if err != nil {
			t.Fatalf("command %q: %v", x, err)
		}
		return words
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = fmt.Sprint(e)
		}
		return out
	}
	t.Fatalf("command %v is neither a string nor a list", v)
	return nil
}

// shellWords splits s into words as a POSIX shell does for the quoting used
// in Makefiles, Dockerfiles and unit files: single quotes, double quotes and
// backslash escapes; no expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// interpolation matches compose's ${VAR}, ${VAR:-default}, ${VAR-default},
// ${VAR:?message} and ${VAR?message}.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate resolves compose variables without reading the test's own
// environment: a default stands for itself, anything else for "".
func interpolate(s string) string {
	s = interpolation.ReplaceAllStringFunc(s, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if strings.HasSuffix(sub[2], "-") {
			return sub[3]
		}
		return ""
	})
	return strings.ReplaceAll(s, "$$", "$")
}

// envEntries turns a compose or k8s environment (map, or list of K=V) into
// "K=V" entries for config.LoadFrom, interpolated.
func envEntries(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	switch x := v.(type) {
	case nil:
	case map[string]any:
		for k, val := range x {
			s := ""
			if val != nil {
				s = fmt.Sprint(val)
			}
			out = append(out, k+"="+interpolate(s))
		}
	case []any:
		for _, e := range x {
			out = append(out, interpolate(fmt.Sprint(e)))
		}
	default:
		t.Fatalf("environment %v is neither a map nor a list", v)
	}
	return out
}

// envFile reads KEY=VALUE lines (systemd EnvironmentFile syntax without
// continuations), skipping comments and blank lines.
func envFile(t *testing.T, rel string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(readFile(t, rel)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s:%d: %q is not KEY=VALUE", rel, n, line)
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		out = append(out, strings.TrimSpace(k)+"="+v)
	}
	return out
}

// unit is a parsed systemd unit file: section → key → values, in order
// (a key may repeat).
type unit map[string]map[string][]string

func (u unit) last(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

func parseUnit(t *testing.T, rel string) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(readFile(t, rel)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		case section == "":
			t.Fatalf("%s:%d: %q before any [Section]", rel, n, line)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s:%d: %q is not Key=Value", rel, n, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// systemdSpan parses a systemd time span: "45", "45s", "1min 30s", "2m".
func systemdSpan(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"": time.Second, "us": time.Microsecond, "ms": time.Millisecond,
		"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	}
	part := regexp.MustCompile(`^\s*([0-9]+)\s*([a-z]*)`)
	var total time.Duration
	rest := strings.TrimSpace(s)
	if rest == "" || rest == "infinity" {
		return 0, fmt.Errorf("time span %q is not finite", s)
	}
	for rest != "" {
		m := part.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("time span %q: cannot read %q", s, rest)
		}
		u, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("time span %q: unknown unit %q", s, m[2])
		}
		n, _ := strconv.Atoi(m[1])
		total += time.Duration(n) * u
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	return total, nil
}

// instruction is one Dockerfile instruction with continuations joined.
type instruction struct {
	line int
	cmd  string // upper-cased: FROM, RUN, ...
	args string
}

func parseDockerfile(t *testing.T, text string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // comment lines inside a continuation are dropped
		}
		if cur.Len() == 0 {
			start = n + 1
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile:%d: continuation at end of file", start)
	}
	return out
}

// execForm reads a JSON-array (exec form) ENTRYPOINT or CMD; ok is false for
// the shell form.
func execForm(args string) ([]string, bool) {
	args = strings.TrimSpace(args)
	if !strings.HasPrefix(args, "[") {
		return nil, false
	}
	var out []string
	if err := yaml.Unmarshal([]byte(args), &out); err != nil {
		return nil, false
	}
	return out, true
}

// makeRecipe returns the recipe lines of target in the Makefile, with
// make's @ and - prefixes removed.
func makeRecipe(t *testing.T, makefile, target string) []string {
	t.Helper()
	var out []string
	in := false
	for _, line := range strings.Split(makefile, "\n") {
		switch {
		case strings.HasPrefix(line, "\t") && in:
			out = append(out, strings.TrimLeft(strings.TrimSpace(line), "@-+"))
		case strings.HasPrefix(line, target+":"):
			in = true
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		default:
			in = false
		}
	}
	if len(out) == 0 {
		t.Fatalf("Makefile has no recipe for %q", target)
	}
	return out
}
