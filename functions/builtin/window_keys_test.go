package builtin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/offheap"
)

func TestWindowKeyRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(windowKey{}); got != 64 {
		t.Fatalf("a key's record is %d bytes, want 64 (see window_keys.go)", got)
	}
	if got := unsafe.Sizeof(windowFiring{}); got != 16 {
		t.Fatalf("a firing is %d bytes, want 16: a period's end makes one for every key", got)
	}
}

// TestKeyTable adds and drops keys at random against a map, with hashes
// drawn from a small set so that keys share hashes and home slots, and
// probes cross the end of the table; keys of different hashes share
// tags; some keys are longer than a record holds.
func TestKeyTable(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			w := &windowOperator{groups: make([]keyTable, 1)}
			w.keys.Init(&w.arena)
			defer w.arena.Close()
			want := map[string]*windowKey{}
			// inv * 0x9e3779b97f4a7c15 == 1: hashes h and h+inv have
			// the same tag (the multiplied hash differs by 1).
			inv := uint64(0x9e3779b97f4a7c15)
			for range 5 {
				inv *= 2 - 0x9e3779b97f4a7c15*inv
			}
			hashOf := func(k string) uint64 { // few distinct hashes and tags
				var h uint64
				for _, c := range k {
					h = h*31 + uint64(c)
				}
				return h%97*0x9e3779b97f4a7c15 + uint64(len(k)%3)*inv
			}
			if a := hashOf("5"); a == a+inv || tagOf(a) != tagOf(a+inv) {
				t.Fatalf("hashes %#x and %#x: want distinct hashes of one tag", a, a+inv)
			}
			for step := range 20_000 {
				k := fmt.Sprint(rng.IntN(3000))
				if rng.IntN(4) == 0 {
					k += "-a-key-longer-than-a-record-holds"
				}
				w.keyBuf = append(w.keyBuf[:0], k...)
				h := hashOf(k)
				got := w.lookup(0, h)
				if got != want[k] {
					t.Fatalf("step %d: lookup %q gave %p, want %p", step, k, got, want[k])
				}
				switch {
				case got == nil:
					want[k] = w.newKey(0, h, false)
				case rng.IntN(2) == 0:
					w.removeKey(got)
					delete(want, k)
				}
			}
			if w.groups[0].n != len(want) || w.keys.Len() != len(want) {
				t.Fatalf("the table holds %d keys in %d records, want %d", w.groups[0].n, w.keys.Len(), len(want))
			}
			for k, ks := range want {
				if w.keyOf(ks) != k {
					t.Fatalf("the record of %q holds %q", k, w.keyOf(ks))
				}
				w.keyBuf = append(w.keyBuf[:0], k...)
				if w.lookup(0, hashOf(k)) != ks {
					t.Fatalf("key %q is not found", k)
				}
			}
			n := 0
			w.eachKey(func(*windowKey) { n++ })
			if n != len(want) {
				t.Fatalf("eachKey gave %d keys, want %d", n, len(want))
			}
			long := 0
			for k := range want {
				if len(k) > keyInline {
					long++
				}
			}
			if long == 0 || len(w.longKeys) != long {
				t.Fatalf("%d long keys kept, want %d (and some)", len(w.longKeys), long)
			}
		})
	}
}

// TestWindowManyKeysFireTogether fires the windows of 20,000 keys at one
// watermark, so the list of firings is made outside the heap, and checks
// every result and its order; then drops every key. Half the keys are
// longer than a record holds.
func TestWindowManyKeysFireTogether(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()", "vs", "sum(v)")
	h := newWinHarness(t, op, winStream(t))
	const keys = 20_000
	name := func(i int) string {
		if i%2 == 1 {
			return fmt.Sprintf("key-%05d-longer-than-a-record-holds", i)
		}
		return fmt.Sprintf("key-%05d", i)
	}
	type result struct{ enc, row string }
	var rows [][]any
	var first, second []result
	for i := range keys {
		enc := string(arrowfmt.AppendKey(nil, name(i)))
		rows = append(rows, []any{i % 10, name(i), 0, i, 0.0}, []any{9, name(i), 0, 1, 0.0})
		first = append(first, result{enc, fmt.Sprintf("0 10 %s 2 %d", name(i), i+1)})
		if i%3 == 0 {
			rows = append(rows, []any{15, name(i), 0, 7, 0.0})
			second = append(second, result{enc, fmt.Sprintf("10 20 %s 1 7", name(i))})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	h.batch(rows...)
	for _, c := range []struct {
		wm   int64
		want []result
	}{{9, first}, {19, second}} {
		// Results of one end come in the order of the keys' encodings.
		slices.SortFunc(c.want, func(a, b result) int { return strings.Compare(a.enc, b.enc) })
		h.watermark(c.wm)
		got := h.out.take()
		if len(got) != len(c.want) {
			t.Fatalf("watermark %d: %d results, want %d", c.wm, len(got), len(c.want))
		}
		for i := range got {
			if got[i] != c.want[i].row {
				t.Fatalf("watermark %d: result %d is %q, want %q", c.wm, i, got[i], c.want[i].row)
			}
		}
	}
	w := h.op.(*windowOperator)
	if w.keys.Len() != 0 || len(w.longKeys) != 0 {
		t.Fatalf("after every window was cleaned up: %d keys, %d long keys kept", w.keys.Len(), len(w.longKeys))
	}
}

// TestTimerListBounds pushes timers of one time whose windows share
// their bounds (a tumbling period's end) and timers of sessions with
// other bounds, interleaved, and checks that eachBlock gives back every timer
// with its own key and bounds: the shared ones are kept as refs beside
// the bounds of the list's first timer, and the others whole.
func TestTimerListBounds(t *testing.T) {
	var a offheap.Arena
	defer a.Close()
	var keys offheap.Slab[windowKey]
	keys.Init(&a)
	var l timerList
	l.init(&a)
	var buf []windowTimer
	type timer struct {
		key        *windowKey
		start, end int64
	}
	for round := range 2 { // a reset list takes the bounds of its next first timer
		want := map[timer]int{}
		shared := 0
		for i := range 100_000 {
			r, ks := keys.New()
			ks.ref = r
			tm := timer{ks, int64(round), 86_400_000}
			if i%7 == 3 { // a session that began later
				tm.start = int64(i)
			} else {
				shared++
			}
			want[tm]++
			l.push(windowTimer(tm))
		}
		if l.Len() != 100_000 || l.keys.Len() != shared {
			t.Fatalf("round %d: %d timers, %d as refs; want 100000, %d", round, l.Len(), l.keys.Len(), shared)
		}
		blocks := 0
		buf = l.eachBlock(&keys, buf, func(ts []windowTimer) {
			if blocks++; len(ts) == 0 || len(ts) > warmBlock {
				t.Fatalf("round %d: a block of %d timers, want 1 to %d", round, len(ts), warmBlock)
			}
			for _, wt := range ts {
				tm := timer(wt)
				if want[tm] == 0 {
					t.Fatalf("round %d: timer %+v not pushed, or given twice", round, tm)
				}
				want[tm]--
			}
		})
		if least := (100_000 + warmBlock - 1) / warmBlock; blocks < least {
			t.Fatalf("round %d: %d blocks, want at least %d", round, blocks, least)
		}
		for tm, n := range want {
			if n != 0 {
				t.Fatalf("round %d: timer %+v not given back", round, tm)
			}
		}
		l.reset()
	}
	l.release()
}

// TestWindowInt64KeyColumns: a window keyed by one int64 column decodes
// the keys of a batch of results or state rows in one pass, and value by
// value when one of them is null. Either way each key's value comes out
// as it came in. A window without keyBy has no key column to decode.
func TestWindowInt64KeyColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	keyed := []string{"-9223372036854775808 1", "-3 2", "0 1", "1099511627776 1", "5 2", "9223372036854775807 1"}
	for _, tc := range []struct {
		name     string
		keyBy    []string
		withNull bool
		want     []string // (id, count), or (count) without keyBy
	}{
		{"keyed", []string{"id"}, false, keyed},
		{"keyed, a null key", []string{"id"}, true, append(slices.Clone(keyed), "null 1")},
		{"no keyBy", nil, true, []string{"9"}},
	} {
		ids := []int64{5, -3, math.MinInt64, 5, 1 << 40, math.MaxInt64, -3, 0}
		ts, id := array.NewTimestampBuilder(mem, arrow.FixedWidthTypes.Timestamp_ms.(*arrow.TimestampType)), array.NewInt64Builder(mem)
		for i, v := range ids {
			ts.Append(arrow.Timestamp(i))
			id.Append(v)
		}
		if tc.withNull {
			ts.Append(100)
			id.AppendNull()
		}
		cols := []arrow.Array{ts.NewArray(), id.NewArray()}
		rec := array.NewRecordBatch(schema, cols, int64(cols[0].Len()))
		for _, c := range cols {
			c.Release()
		}
		ts.Release()
		id.Release()

		out := &winCollector{}
		op, err := NewWindow(winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(3_600_000)}, tc.keyBy, "n", "count()"), Stream{Schema: schema, TimeColumn: 0})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Open(&task.Context{MaxParallelism: 128, Mem: mem, Out: out, Counters: &task.Counters{}}); err != nil {
			t.Fatal(err)
		}
		w := op.(*windowOperator)
		if err := w.ProcessBatch(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		want := slices.Sorted(slices.Values(tc.want))
		k := len(tc.keyBy) // the key's columns in a row, before the count
		var state []string
		for _, r := range sortedStateRows(w, mem) {
			// key group, keys, kind, start, end, emitted, pending, count
			f := strings.Fields(r)
			state = append(state, strings.Join(append(f[1:1+k], f[6+k]), " "))
		}
		slices.Sort(state)
		if !slices.Equal(state, want) {
			t.Fatalf("%s: state rows %v, want %v", tc.name, state, want)
		}
		if err := w.ProcessWatermark(task.MaxWatermark); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out.take() {
			// window_start, window_end, keys, n
			got = append(got, strings.Join(strings.Fields(r)[2:], " "))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: results %v, want %v", tc.name, got, want)
		}
		if err := op.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSortRefs sorts lists of refs of every length up to past the radix
// sort's threshold, and some long enough for its larger digits, with
// repeats, and refs of up to 16, 24 and 32 bits (one to three passes),
// against slices.Sort and slices.Compact, and in place (repeats kept);
// the buffer a call hands back serves the next.
func TestSortRefs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var buf []offheap.Ref
	lengths := []int{4095, 4096, 20_000} // 12-bit digits from 4096
	for n := range 300 {
		lengths = append(lengths, n)
	}
	for _, bits := range []int{16, 24, 32} {
		for _, n := range lengths {
			refs := make([]offheap.Ref, n)
			for i := range refs {
				refs[i] = offheap.Ref(rng.Uint64() >> (64 - bits))
				if i > 0 && rng.IntN(5) == 0 {
					refs[i] = refs[rng.IntN(i)]
				}
			}
			all := slices.Clone(refs)
			slices.Sort(all)
			want := slices.Compact(slices.Clone(all))
			var got []offheap.Ref
			got, buf = sortRefs(slices.Clone(refs), buf)
			if !slices.Equal(got, want) {
				t.Fatalf("%d refs of %d bits: sorted to %v, want %v", n, bits, got, want)
			}
			// In place, repeats kept, whatever the passes' count.
			got = slices.Clone(refs)
			buf = sortRefsInPlace(got, buf)
			if !slices.Equal(got, all) {
				t.Fatalf("%d refs of %d bits: sorted in place to %v, want %v", n, bits, got, all)
			}
		}
	}
}
