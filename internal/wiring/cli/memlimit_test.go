package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// Every command's process gets process.memory_limit (1 GiB by default)
// unless GOMEMLIMIT says otherwise, from the same --config file and
// HOMING_* variables the command reads.
func TestMemoryLimitComesFromTheConfiguration(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "homing.yaml")
	if err := os.WriteFile(file, []byte("process: {memory_limit: 256MiB}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		want    int64
		set     bool
	}{
		{"default", []string{"worker"}, nil, 1 << 30, true},
		{"file", []string{"webhook", "create", "--config", file}, nil, 256 << 20, true},
		{"file with =", []string{"--config=" + file, "serve"}, nil, 256 << 20, true},
		{"environment over file", []string{"--config", file}, []string{"HOMING_PROCESS_MEMORY_LIMIT=128MiB"}, 128 << 20, true},
		{"GOMEMLIMIT wins", []string{"--config", file}, []string{"GOMEMLIMIT=3GiB"}, 0, false},
		{"0 sets none", nil, []string{"HOMING_PROCESS_MEMORY_LIMIT=0"}, 0, false},
		{"a bad configuration sets none", nil, []string{"HOMING_PROCESS_MEMORY_LIMIT=lots"}, 0, false},
	} {
		got, set := memoryLimit(tc.args, tc.environ)
		if got != tc.want || set != tc.set {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, set, tc.want, tc.set)
		}
	}
}
