package statestore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStepSort sorts random keys in steps of random small work and checks
// the result is the keys sorted, whatever the sizes around sortRun.
func TestStepSort(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 2, sortRun - 1, sortRun, sortRun + 1, 2 * sortRun, 3*sortRun + 17, 5000} {
		keys := make([]entryKey, n)
		for i := range keys {
			keys[i] = entryKey{key: fmt.Sprint("k", r.IntN(n/2+1)), ns: fmt.Sprint(r.IntN(3))}
		}
		want := slices.Clone(keys)
		slices.SortFunc(want, compareEntryKeys)
		s := stepSort{a: keys}
		steps := 0
		for !s.step(1 + r.IntN(40)) {
			steps++
		}
		if !slices.Equal(s.a, want) {
			t.Fatalf("%d keys in %d steps: not sorted as slices.SortFunc sorts them", n, steps)
		}
		if n > sortRun && steps < n/40 {
			t.Errorf("%d keys sorted in %d steps: a step did more than its work", n, steps)
		}
	}
}
