package worker

import (
	"reflect"
	"testing"

	"github.com/homingdev/homing/tasks"
)

func TestWithSystemQueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want map[string]int
	}{
		{nil, map[string]int{"default": 9, tasks.SystemQueue: 1}},
		{map[string]int{"default": 6, "low": 1}, map[string]int{"default": 54, "low": 9, tasks.SystemQueue: 7}},
		{map[string]int{"bulk": 2, tasks.SystemQueue: 1}, map[string]int{"bulk": 2, tasks.SystemQueue: 1}},
	}
	for _, tt := range tests {
		if got := withSystemQueue(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("withSystemQueue(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
