package statestore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/pebblestate"
	"github.com/weirstream/weir/statestore/statetest"
)

// TestCaptureInSteps drives two backends with the same random changes to
// tables and timers. One takes each snapshot at once; the other begins it
// at the same point and captures it in steps of one row (every second
// run) or 256 (whole key groups here), one step after each change that
// follows; from seed 4 on it is handed out in parts of a few rows, which
// must cover the key groups in order. Every capture (its parts in order)
// must equal its snapshot row for row: what changed before the walk reached it was copied as it
// was at the barrier, or read from the store's snapshot (pebble). With a
// heap table of slices (values that may be changed in place), or over a
// store that takes no snapshots (mapStore), the capture is done at once
// in BeginSnapshot.
func TestCaptureInSteps(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	backends := map[string]func(t *testing.T) *statestore.Memory{
		"memory": func(*testing.T) *statestore.Memory { return statestore.NewMemory(3, 11) },
		"stored": func(*testing.T) *statestore.Memory { return statestore.NewStored(3, 11, mapStore{}) },
		"pebble": func(t *testing.T) *statestore.Memory {
			s, err := pebblestate.Open(pebblestate.Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return statestore.NewStored(3, 11, s)
		},
	}
	for name, newBackend := range backends {
		for _, slices := range []bool{false, true} {
			if slices && name != "memory" {
				continue
			}
			for seed := range uint64(8) {
				t.Run(fmt.Sprintf("%s/slices=%v/%d", name, slices, seed), func(t *testing.T) {
					if seed%2 == 1 {
						defer statestore.SetStepRows(1)()
					}
					// From seed 4 on, the capture is handed out in
					// parts of a few rows (PartedCapture).
					parts := 0
					if seed >= 4 {
						parts = int(seed-3) * 40
					}
					captureInSteps(t, mem, seed, newBackend(t), newBackend(t), slices, slices || name == "stored", parts)
				})
			}
		}
	}
}

type captureTables struct {
	count statestore.Table[int64]
	name  statestore.Table[string]
	list  statestore.Table[[]int64] // nil unless slices
}

func openCaptureTables(t *testing.T, b *statestore.Memory, slices bool) captureTables {
	t.Helper()
	var ct captureTables
	var err error
	if ct.count, err = statestore.OpenTable[int64](b, "count", nil); err != nil {
		t.Fatal(err)
	}
	if ct.name, err = statestore.OpenTable[string](b, "name", nil); err != nil {
		t.Fatal(err)
	}
	if slices {
		if ct.list, err = statestore.OpenTable[[]int64](b, "list", nil); err != nil {
			t.Fatal(err)
		}
	}
	return ct
}

// inRuns sorts the rows renderBatches rendered within each run of one key
// group and table: a heap table writes its entries in the order of their
// cells, which two backends given the same changes place alike only if
// their captures freed the same cells at the same times. The runs stay
// in their order.
func inRuns(t *testing.T, rendered string) string {
	t.Helper()
	body := strings.TrimSuffix(strings.TrimPrefix(rendered, "["), "]")
	if body == "" {
		return rendered
	}
	rows := strings.Split(body, "\n,")
	type run struct{ kg, table string }
	runOf := func(row string) run {
		var r struct {
			KeyGroup json.Number `json:"key_group"`
			Table    string      `json:"table"`
		}
		if err := json.Unmarshal([]byte(row), &r); err != nil {
			t.Fatalf("row %s: %v", row, err)
		}
		return run{r.KeyGroup.String(), r.Table}
	}
	for start := 0; start < len(rows); {
		end, r := start+1, runOf(rows[start])
		for end < len(rows) && runOf(rows[end]) == r {
			end++
		}
		slices.Sort(rows[start:end])
		start = end
	}
	return "[" + strings.Join(rows, "\n,") + "]"
}

// renderBatches renders the rows of batches as JSON, wherever the batches
// are cut, and releases them.
func renderBatches(batches []arrow.RecordBatch) string {
	var rows []string
	for _, r := range batches {
		j, _ := r.MarshalJSON()
		if b := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(j)), "["), "]"); strings.TrimSpace(b) != "" {
			rows = append(rows, strings.TrimSpace(b))
		}
		r.Release()
	}
	return "[" + strings.Join(rows, "\n,") + "]"
}

func captureInSteps(t *testing.T, mem memory.Allocator, seed uint64, atOnce, stepped *statestore.Memory, slices, wantAtOnce bool, partBytes int) {
	r := rand.New(rand.NewPCG(seed, 0xca97))
	tabs := [2]captureTables{openCaptureTables(t, atOnce, slices), openCaptureTables(t, stepped, slices)}
	backends := [2]*statestore.Memory{atOnce, stepped}
	var (
		capture   statestore.Capture
		want      string // what the capture in flight must give
		steps     int    // steps the capture in flight took
		captures  int
		longest   int
		got       []arrow.RecordBatch // the parts taken so far
		nextGroup int                 // where the next part must start
		parted    int                 // captures in more than one part
		wm, now   int64
		snapshots int
	)
	collect := func(deadline time.Time) {
		t.Helper()
		done, err := capture.Step(deadline)
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if pc, ok := capture.(statestore.PartedCapture); ok && partBytes > 0 {
			for _, p := range pc.TakeParts() {
				if p.KeyGroupStart != nextGroup || p.KeyGroupEnd <= p.KeyGroupStart {
					t.Fatalf("capture %d: part [%d, %d), want one from %d", captures, p.KeyGroupStart, p.KeyGroupEnd, nextGroup)
				}
				nextGroup = p.KeyGroupEnd
				got = append(got, p.Batches...)
			}
		}
		if !done {
			return
		}
		if partBytes > 0 {
			// A capture done at its beginning is one part.
			if nextGroup != 11 {
				t.Fatalf("capture %d: its parts end at key group %d, want 11", captures, nextGroup)
			}
			if len(got) > 1 {
				parted++
			}
		}
		got = append(got, capture.Batches()...)
		if got := inRuns(t, renderBatches(got)); got != inRuns(t, want) {
			t.Fatalf("capture %d (in %d steps) differs from the snapshot at its barrier:\n got %s\nwant %s", captures, steps, got, want)
		}
		got = nil
		capture.Release()
		capture = nil
		captures++
		longest = max(longest, steps)
	}
	for range 600 {
		kg, key, ns := 3+r.IntN(8), fmt.Sprint("k", r.IntN(20)), []string{"", "n"}[r.IntN(2)]
		ts, val := r.Int64N(60), r.Int64N(100)
		// Timers of few keys and times, so that deletes find them.
		timer := statestore.Timer{Timestamp: wm + ts%6*10, KeyGroup: kg, Key: fmt.Sprint("t", val%3), Namespace: ns}
		op := r.IntN(20)
		if op >= 14 && op < 16 {
			// Delete a timer that is set, if the key group has one.
			atOnce.Timers().Range(statestore.Domain(ts%2), kg, func(t statestore.Timer) bool {
				timer = t
				return false
			})
		}
		if op == 19 {
			if capture != nil {
				collect(time.Time{})
			}
			full := snapshots%3 == 0
			snapshots++
			batches, err := atOnce.Snapshot(mem, full)
			if err != nil {
				t.Fatal(err)
			}
			want = renderBatches(batches)
			if capture, err = stepped.BeginSnapshot(mem, full); err != nil {
				t.Fatal(err)
			}
			if pc, ok := capture.(statestore.PartedCapture); ok {
				pc.SplitParts(partBytes)
			}
			steps, nextGroup = 0, 3
			continue
		}
		for i, b := range backends {
			tab := tabs[i]
			switch {
			case op < 5:
				tab.count.Put(kg, key, ns, val)
			case op < 8:
				tab.name.Put(kg, key, ns, strings.Repeat("x", int(ts%5)))
			case op < 10:
				tab.count.Delete(kg, key, ns)
				tab.name.Delete(kg, key, ns)
			case op < 11 && tab.list != nil:
				l, _ := tab.list.Get(kg, key, ns)
				tab.list.Put(kg, key, ns, append(l, ts)) // may change l in place
			case op < 14:
				b.Timers().Register(statestore.Domain(ts%2), timer)
			case op < 16:
				b.Timers().Delete(statestore.Domain(ts%2), timer)
			case op < 18:
				b.Timers().AdvanceWatermark(wm + ts/4)
			default:
				b.Timers().DueProcessing(now + ts/4)
			}
		}
		// The same random draws for both backends: the draws above
		// are made once, before the loop over them.
		switch {
		case op >= 16 && op < 18:
			wm += ts / 4
		case op >= 18:
			now += ts / 4
		}
		if capture != nil {
			collect(time.Now()) // one key group per step
		}
	}
	if capture != nil {
		collect(time.Time{})
	}
	t.Logf("%d captures, the longest in %d steps, %d in several parts", captures, longest, parted)
	if partBytes > 0 && !wantAtOnce && parted == 0 {
		t.Errorf("no capture came in several parts of %d bytes", partBytes)
	}
	if captures < 10 {
		t.Fatalf("only %d captures", captures)
	}
	if wantAtOnce && longest != 1 {
		t.Errorf("a capture took %d steps, want it done at its beginning", longest)
	}
	if !wantAtOnce && longest < 8 {
		t.Errorf("the longest capture took %d steps: they did not go on beside the changes", longest)
	}
}

// BenchmarkCapture measures what a backend's snapshot costs the task at
// the barrier: 1M string entries over 64 key groups on the heap, a base
// taken at once (Snapshot, what the barrier did before) or begun and
// captured in steps of 5 ms (a step writes whole key groups). It reports
// the barrier's part and the longest step, in ms.
func BenchmarkCapture(b *testing.B) {
	const entries, groups = 1_000_000, 64
	mem := memory.NewGoAllocator()
	be := statestore.NewMemory(0, groups)
	tab, err := statestore.OpenTable[string](be, "t", nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range entries {
		tab.Put(i%groups, fmt.Sprint("key-", i), "", fmt.Sprint("value-", i))
	}
	statetest.BenchmarkCapture(b, be, mem, entries, nil)
}

// TestCaptureDeletedBesideNamespace: a delta of pebble state read in steps
// from the store's snapshot, where a key's entry of one namespace was
// deleted and another namespace's is there: the deleted one is written as
// deleted, not as the next entry the snapshot has.
func TestCaptureDeletedBesideNamespace(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var out [2]string
	for i, stepped := range []bool{false, true} {
		s, err := pebblestate.Open(pebblestate.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		b := statestore.NewStored(0, 4, s)
		tab, err := statestore.OpenTable[int64](b, "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		tab.Put(1, "k", "", 1)
		tab.Put(1, "k", "n", 2)
		batches, err := b.Snapshot(mem, true)
		if err != nil {
			t.Fatal(err)
		}
		renderBatches(batches)
		tab.Delete(1, "k", "")
		if !stepped {
			batches, err = b.Snapshot(mem, false)
		} else {
			batches, err = captureRest(b, mem)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[i] = renderBatches(batches)
	}
	if out[0] != out[1] || !strings.Contains(out[1], `"deleted":true`) {
		t.Errorf("delta in steps:\n%s\nwant, as at once:\n%s", out[1], out[0])
	}
}

// captureRest begins a delta and captures it in steps to the end.
func captureRest(b *statestore.Memory, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	c, err := b.BeginSnapshot(mem, false)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	for {
		done, err := c.Step(time.Now())
		if err != nil {
			return nil, err
		}
		if done {
			return c.Batches(), nil
		}
	}
}
