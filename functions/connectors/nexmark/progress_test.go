package nexmark

import "testing"

// subtaskEvents agrees with Events, and a drained subtask has read its
// whole total.
func TestNexmarkProgress(t *testing.T) {
	for _, par := range []int{1, 2, 3, 7} {
		for _, limit := range []int64{0, 1, nexmarkBlock - 1, nexmarkBlock, 5*nexmarkBlock + 17, 12_345} {
			var sum int64
			for st := range par {
				var want int64
				Events(st, par, limit, func(int64) { want++ })
				if got := subtaskEvents(st, par, limit); got != want {
					t.Errorf("subtaskEvents(%d, %d, %d) = %d, want %d", st, par, limit, got, want)
				}
				sum += want
			}
			if sum != limit {
				t.Errorf("parallelism %d, limit %d: subtasks sum to %d", par, limit, sum)
			}
		}
	}
	const count = 5_017
	for st := range 3 {
		s := openNexmark(t, nexmarkSpec(count), st, 3, nil)
		read, total, unit, ok := s.Progress()
		if !ok || read != 0 || unit != "records" || total != subtaskEvents(st, 3, count) {
			t.Fatalf("subtask %d before polling: %d of %d %s (ok %v)", st, read, total, unit, ok)
		}
		ids := drain(t, s, 300, -1)
		read, _, _, _ = s.Progress()
		if n := int64(len(ids[0]) + len(ids[1]) + len(ids[2])); read != n || read != total {
			t.Errorf("subtask %d drained: read %d of %d, generated %d", st, read, total, n)
		}
	}
	if _, _, _, ok := openNexmark(t, nexmarkSpec(0), 0, 1, nil).Progress(); ok {
		t.Error("an unbounded nexmark source reports a total")
	}
}
