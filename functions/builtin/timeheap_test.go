package builtin

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTimeHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h timeHeap
	var all []int64
	for range 500 {
		v := r.Int64N(1000) - 500
		h.push(v)
		all = append(all, v)
	}
	slices.Sort(all)
	if _, ok := h.popDue(all[0] - 1); ok {
		t.Fatal("popped a time after the watermark")
	}
	for i, want := range all {
		got, ok := h.popDue(want)
		if !ok || got != want {
			t.Fatalf("pop %d = %d %v, want %d", i, got, ok, want)
		}
	}
	if _, ok := h.popDue(1 << 62); ok || len(h) != 0 {
		t.Fatal("heap not empty")
	}
}
