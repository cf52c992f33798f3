package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestReleaseStatic checks that `make release`, the Dockerfile's build
// without Docker, yields static binaries: the final image
// (distroless/static) has no C library to load. A binary is static when
// nothing in it is linked through cgo, which takes two facts:
//
//   - no package the commands import, other than the standard library's,
//     has cgo files. With CGO_ENABLED=0 such a package fails to build, or
//     builds a stub that fails at run time (mattn/go-sqlite3 does), which
//     no look at the binary would see;
//   - the recipe's environment and flags, on the standard library packages
//     that link the C library by default (net, os/user), make a static ELF
//     binary. That one is built for real, with the recipe's own words.
//
// It used to run the recipe itself, a second compile of every package
// beside make test's race build: 341 s of CPU on an empty build cache, the
// longest part of a fresh CI run, and it checked less (a cgo stub passes).
func TestReleaseStatic(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skipf("checks ELF binaries; GOOS is %s", runtime.GOOS)
	}
	root := repoRoot(t)
	out, words := splitOutput(releaseCommand(t))
	if out == "" || filepath.IsAbs(out) {
		t.Fatalf("Makefile release: want -o with a directory inside the repo, got %q", out)
	}
	// words: [VAR=value ...] go build [flags ...] packages ...
	var env, flags, pkgs []string
	i := 0
	for ; i < len(words) && strings.Contains(words[i], "="); i++ {
		env = append(env, words[i])
	}
	if len(words) < i+2 || words[i] != "go" || words[i+1] != "build" {
		t.Fatalf("Makefile release: %q is not [VAR=value ...] go build ...", words)
	}
	rest := words[i+2:]
	for j := 0; j < len(rest); j++ {
		w := rest[j]
		if !strings.HasPrefix(w, "-") {
			pkgs = rest[j:]
			break
		}
		flags = append(flags, w)
		if valueFlags[w] && j+1 < len(rest) {
			flags = append(flags, rest[j+1])
			j++
		}
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Fatalf("Makefile release: %q does not set CGO_ENABLED=0; a cgo build links the C library", words)
	}
	if !slices.Contains(pkgs, "./cmd/...") {
		t.Fatalf("Makefile release: builds %q, want every command (./cmd/...)", pkgs)
	}

	// Every package of every command, with cgo on (the default), as a
	// package that needs C would be seen.
	list := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f",
		`{{if and (not .Standard) (or .CgoFiles .CFiles .CXXFiles .SwigFiles)}}{{.ImportPath}}{{"\n"}}{{end}}`, "./cmd/...")
	list.Dir = root
	list.Env = append(os.Environ(), "CGO_ENABLED=1")
	b, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/...: %v\n%s", err, stderrOf(err))
	}
	if cgo := strings.Fields(string(b)); len(cgo) > 0 {
		t.Errorf("the commands import packages with C in them, which a CGO_ENABLED=0 release cannot link: %v", cgo)
	}
	// And every package builds its files under the recipe's environment.
	list = exec.CommandContext(t.Context(), "go", "list", "-deps", "-e", "-f", `{{with .Error}}{{$.ImportPath}}: {{.}}{{"\n"}}{{end}}`, "./cmd/...")
	list.Dir = root
	list.Env = append(os.Environ(), env...)
	if b, err = list.Output(); err != nil || strings.TrimSpace(string(b)) != "" {
		t.Errorf("go list under %v: %v\n%s%s", env, err, b, stderrOf(err))
	}

	// The recipe's words on a program of the standard library's cgo users.
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod": "module releasecheck\n\ngo 1.22\n",
		"main.go": `package main

import (
	"fmt"
	"net"
	"os/user"
)

func main() {
	u, _ := user.Current()
	addrs, _ := net.LookupHost("localhost")
	fmt.Println(u, addrs)
}
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "releasecheck")
	build := exec.CommandContext(t.Context(), "go", append(append([]string{"build"}, flags...), "-o", bin, ".")...)
	build.Dir = dir
	build.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS="), env...)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v under %v: %v\n%s", flags, env, err, b)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the recipe's build has a PT_INTERP program header: it is dynamically linked")
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Errorf("the recipe's build has a PT_DYNAMIC program header")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Fatal(err)
	} else if len(libs) > 0 {
		t.Errorf("the recipe's build needs shared libraries %v", libs)
	}
}

// valueFlags are go build's flags that take the next word as their value.
var valueFlags = map[string]bool{"-ldflags": true, "-gcflags": true, "-asmflags": true, "-tags": true, "-o": true, "-p": true, "-mod": true, "-pgo": true}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
