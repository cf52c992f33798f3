package deploy

import (
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReleaseStatic runs `make release`, the Dockerfile's build without
// Docker, and checks that it yields every command as a static binary: the
// final image (distroless/static) has no C library to load.
func TestReleaseStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every command; skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("checks ELF binaries; GOOS is %s", runtime.GOOS)
	}
	root := repoRoot(t)
	out, _ := splitOutput(releaseCommand(t))
	if out == "" || filepath.IsAbs(out) {
		t.Fatalf("Makefile release: want -o with a directory inside the repo, got %q", out)
	}
	outDir := filepath.Join(root, filepath.FromSlash(out))

	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var commands []string
	for _, e := range entries {
		if e.IsDir() {
			commands = append(commands, e.Name())
		}
	}
	if len(commands) < 4 {
		t.Fatalf("cmd/ holds %v; want homing, worker, scheduler and enqueue at least", commands)
	}
	// go build leaves an up-to-date binary alone, so a stale one would pass:
	// remove them first.
	for _, c := range commands {
		if err := os.Remove(filepath.Join(outDir, c)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}

	// No deadline of its own: a static build of every command is minutes of
	// CPU on a cold cache, and on a busy machine its wall time says nothing
	// (CI on f5b81fe killed it at 8 minutes while the build moved on). A
	// build that hangs is ended by go test's -timeout, which names it.
	make := exec.CommandContext(t.Context(), "make", "-C", root, "release")
	if b, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, b)
	}

	for _, c := range commands {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			f, err := elf.Open(filepath.Join(outDir, c))
			if err != nil {
				t.Fatalf("make release did not produce %s: %v", c, err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s has a PT_INTERP program header: it is dynamically linked (CGO_ENABLED=0 missing?)", c)
				}
				if p.Type == elf.PT_DYNAMIC {
					t.Errorf("%s has a PT_DYNAMIC program header", c)
				}
			}
			libs, err := f.ImportedLibraries()
			if err != nil {
				t.Fatal(err)
			}
			if len(libs) > 0 {
				t.Errorf("%s needs shared libraries %v", c, libs)
			}
		})
	}
}
