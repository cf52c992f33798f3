package budget

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCheckHeap is one read of the heap against the ceiling, which
// every evaluation pays every heapCheckEvery steps and at every
// allocation of heapCheckBytes or more.
func BenchmarkCheckHeap(b *testing.B) {
	bud := New(context.Background(), Limits{What: "evaluation", Limit: time.Second, Steps: 1 << 20, Bytes: 1 << 20, MaxValue: 1 << 20})
	for b.Loop() {
		if err := bud.CheckHeap(); err != nil {
			b.Fatal(err)
		}
	}
}
