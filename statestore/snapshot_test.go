package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
)

// snapTables are the typed tables of the random test's backends.
type snapTables struct {
	count Table[int64]
	name  Table[string]
	list  Table[[]int64]
	m     Table[map[string]int64]
}

var snapTableNames = []string{"count", "list", "map", "name"}

// openSnapTable opens one of snapTableNames in b with its type.
func openSnapTable(t testing.TB, b *Memory, st *snapTables, name string) {
	t.Helper()
	var err error
	switch name {
	case "count":
		st.count, err = OpenTable[int64](b, name, nil)
	case "name":
		st.name, err = OpenTable[string](b, name, nil)
	case "list":
		st.list, err = OpenTable[[]int64](b, name, nil)
	case "map":
		st.m, err = OpenTable(b, name, Codec[map[string]int64](MapCodec[string, int64]{}))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func openSnapTables(t testing.TB, b *Memory) *snapTables {
	st := &snapTables{}
	for _, n := range snapTableNames {
		openSnapTable(t, b, st, n)
	}
	return st
}

// stateDump is everything a backend holds, comparable with DeepEqual.
type stateDump struct {
	Tables map[string]map[Scope]any
	Timers [2][]Timer
}

func dumpTable[V any](d map[Scope]any, tab Table[V], start, end int) {
	for kg := start; kg < end; kg++ {
		tab.Range(kg, func(key, ns string, v V) bool {
			d[Scope{kg, key, ns}] = v
			return true
		})
	}
}

func dumpState(b *Memory, st *snapTables) stateDump {
	d := stateDump{Tables: map[string]map[Scope]any{}}
	for _, n := range snapTableNames {
		d.Tables[n] = map[Scope]any{}
	}
	dumpTable(d.Tables["count"], st.count, b.start, b.end)
	dumpTable(d.Tables["name"], st.name, b.start, b.end)
	dumpTable(d.Tables["list"], st.list, b.start, b.end)
	dumpTable(d.Tables["map"], st.m, b.start, b.end)
	for dom := range d.Timers {
		for kg := b.start; kg < b.end; kg++ {
			b.Timers().Range(Domain(dom), kg, func(t Timer) bool {
				d.Timers[dom] = append(d.Timers[dom], t)
				return true
			})
		}
		slices.SortFunc(d.Timers[dom], Timer.compare)
	}
	return d
}

// snapRows formats the rows of batches, one string per row.
func snapRows(t testing.TB, recs []arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		c, err := snapshotColumns(r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(r.NumRows()) {
			v, ts := "-", "-"
			if c.value.IsValid(i) {
				v = fmt.Sprintf("%x", c.value.Value(i))
			}
			if c.ts.IsValid(i) {
				ts = fmt.Sprint(c.ts.Value(i))
			}
			out = append(out, fmt.Sprintf("%d %s %q %q %s %s %v", c.kg.Value(i), c.table.Value(i), c.key.Value(i), c.ns.Value(i), v, ts, c.deleted.Value(i)))
		}
	}
	return out
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

func snapshot(t testing.TB, b *Memory, mem memory.Allocator, full bool) []arrow.RecordBatch {
	t.Helper()
	recs, err := b.Snapshot(mem, full)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func restoreAll(t testing.TB, b *Memory, chain [][]arrow.RecordBatch) {
	t.Helper()
	for _, snap := range chain {
		for _, r := range snap {
			if err := b.Restore(r); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func countRows(recs []arrow.RecordBatch) int {
	n := 0
	for _, r := range recs {
		n += int(r.NumRows())
	}
	return n
}

// TestSnapshotRandom runs random writes, deletes and timers on a backend,
// snapshots it at random points (a base, then deltas, now and then a new
// base), and restores the base and its deltas into fresh backends, whose
// state and timers must equal the source's, and fire alike.
func TestSnapshotRandom(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	for seed := range uint64(200) {
		// The checked allocator is slow: every tenth seed checks that
		// every batch is released.
		var mem memory.Allocator = memory.DefaultAllocator
		if seed%10 == 0 {
			mem = checked
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomSnapshots(t, mem, seed) })
		if t.Failed() {
			return
		}
	}
}

func randomSnapshots(t *testing.T, mem memory.Allocator, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	start := r.IntN(8)
	end := start + 1 + r.IntN(12)
	src := NewMemory(start, end)
	if seed%4 == 1 {
		src.batchBytes = 40 // many small batches
	}
	st := openSnapTables(t, src)
	var chain [][]arrow.RecordBatch
	defer func() {
		for _, s := range chain {
			releaseAll(s)
		}
	}()
	wm, now := int64(0), int64(0)
	scope := func() (int, string, string) {
		return start + r.IntN(end-start), fmt.Sprint("k", r.IntN(12)), []string{"", "w1", "w2"}[r.IntN(3)]
	}
	timer := func() (Domain, Timer) {
		kg, k, ns := scope()
		d := Domain(r.IntN(2))
		base := wm
		if d == ProcessingTime {
			base = now
		}
		return d, Timer{Timestamp: base - 5 + r.Int64N(40), KeyGroup: kg, Key: k, Namespace: ns}
	}
	verified := 0
	steps := 100 + r.IntN(300)
	for step := range steps {
		switch op := r.IntN(30); {
		case op < 3:
			kg, k, ns := scope()
			st.count.Put(kg, k, ns, r.Int64N(100)-50)
		case op < 5:
			kg, k, ns := scope()
			st.name.Put(kg, k, ns, strings.Repeat("x", r.IntN(4)))
		case op < 7:
			kg, k, ns := scope()
			l, _ := st.list.Get(kg, k, ns)
			st.list.Put(kg, k, ns, append(slices.Clone(l), r.Int64N(9)))
		case op < 8:
			kg, k, ns := scope()
			m, _ := st.m.Get(kg, k, ns)
			m = maps.Clone(m)
			if m == nil {
				m = map[string]int64{}
			}
			m[fmt.Sprint(r.IntN(3))] = r.Int64N(5)
			st.m.Put(kg, k, ns, m)
		case op < 11:
			kg, k, ns := scope()
			[]interface{ Delete(int, string, string) }{st.count, st.name, st.list, st.m}[r.IntN(4)].Delete(kg, k, ns)
		case op < 14:
			src.Timers().Register(timer())
		case op < 15:
			src.Timers().Delete(timer())
		case op < 16:
			wm += r.Int64N(10)
			src.Timers().AdvanceWatermark(wm)
		case op < 17:
			now += r.Int64N(10)
			src.Timers().DueProcessing(now)
		case op < 28:
			kg, k, ns := scope()
			st.count.Put(kg, k, ns, r.Int64N(100)-50)
		default:
			full := len(chain) == 0 || r.IntN(5) == 0 || step == steps-1 && r.IntN(2) == 0
			recs := snapshot(t, src, mem, full)
			if full {
				for _, s := range chain {
					releaseAll(s)
				}
				chain = chain[:0]
			}
			chain = append(chain, recs)
			if r.IntN(3) == 0 || step >= steps-30 && verified == 0 {
				verifyRestore(t, mem, r, src, st, chain)
				verified++
			}
		}
	}
	// A final delta, and the restored backend fires its timers like the
	// source.
	chain = append(chain, snapshot(t, src, mem, false))
	dst := NewMemory(start, end)
	dt := openSnapTables(t, dst)
	restoreAll(t, dst, chain)
	if got, want := dumpState(dst, dt), dumpState(src, st); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs\n got %v\nwant %v", got, want)
	}
	checkWatermark(t, src, dst)
	gn, gok := dst.Timers().NextEventTime()
	wn, wok := src.Timers().NextEventTime()
	if gn != wn || gok != wok {
		t.Errorf("next event time %d %v, want %d %v", gn, gok, wn, wok)
	}
	if got, want := dst.Timers().AdvanceWatermark(math.MaxInt64), src.Timers().AdvanceWatermark(math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Errorf("event-time timers fire\n got %v\nwant %v", got, want)
	}
	if got, want := dst.Timers().DueProcessing(math.MaxInt64), src.Timers().DueProcessing(math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Errorf("processing-time timers fire\n got %v\nwant %v", got, want)
	}
}

// verifyRestore restores chain, the source's snapshots since its last base,
// into fresh backends in several ways and compares with the source.
func verifyRestore(t *testing.T, mem memory.Allocator, r *rand.Rand, src *Memory, st *snapTables, chain [][]arrow.RecordBatch) {
	t.Helper()
	start, end := src.KeyGroups()
	want := dumpState(src, st)

	// Tables opened before the restore (the usual order), after it, or
	// some before and some after.
	for _, mode := range []int{r.IntN(3)} {
		dst := NewMemory(start, end)
		dt := &snapTables{}
		var later []string
		for _, n := range snapTableNames {
			if mode == 0 || mode == 2 && r.IntN(2) == 0 {
				openSnapTable(t, dst, dt, n)
			} else {
				later = append(later, n)
			}
		}
		restoreAll(t, dst, chain)
		if mode == 1 {
			// Not opened yet: a full snapshot carries the encoded rows on,
			// and a delta has nothing.
			if d := snapshot(t, dst, mem, false); len(d) != 0 {
				releaseAll(d)
				t.Fatal("restored backend has a non-empty delta")
			}
			base := snapshot(t, dst, mem, true)
			again := NewMemory(start, end)
			restoreAll(t, again, [][]arrow.RecordBatch{base})
			releaseAll(base)
			dst = again
		}
		for _, n := range later {
			openSnapTable(t, dst, dt, n)
		}
		if len(dst.pending) != 0 {
			t.Fatalf("mode %d: tables still pending after OpenTable: %v", mode, dst.pending)
		}
		if got := dumpState(dst, dt); !reflect.DeepEqual(got, want) {
			t.Fatalf("mode %d: restored state differs\n got %v\nwant %v", mode, got, want)
		}
		checkWatermark(t, src, dst)
		if d := snapshot(t, dst, mem, false); len(d) != 0 {
			t.Errorf("mode %d: delta right after restore has %d rows: %q", mode, countRows(d), snapRows(t, d))
			releaseAll(d)
		}
	}
}

// checkWatermark: if src has event-time timers at or before its
// watermark, dst restored from it knows that watermark.
func checkWatermark(t *testing.T, src, dst *Memory) {
	t.Helper()
	next, ok := src.Timers().NextEventTime()
	if wm := src.Timers().Watermark(); ok && next <= wm && dst.Timers().Watermark() != wm {
		t.Fatalf("timer at %d, watermark %d: restored watermark %d", next, wm, dst.Timers().Watermark())
	}
}

func TestSnapshotWatermarkRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewMemory(0, 4)
	if wm := b.Timers().Watermark(); wm != math.MinInt64 {
		t.Fatalf("watermark of a new backend %d", wm)
	}
	tm := b.Timers()
	tm.Register(EventTime, Timer{Timestamp: 10, KeyGroup: 1, Key: "a"})
	tm.Register(EventTime, Timer{Timestamp: 50, KeyGroup: 2, Key: "b"})
	tm.AdvanceWatermark(20)
	tm.Register(EventTime, Timer{Timestamp: 15, KeyGroup: 3, Key: "c"}) // late: due with the next watermark
	base := snapshot(t, b, mem, true)
	defer releaseAll(base)
	want := []string{
		`2 __timers_event "b" "" - 50 false`,
		`3 __timers_event "c" "" - 15 false`,
		`3 __timers_watermark "" "" - 20 false`,
	}
	if got := snapRows(t, base); !slices.Equal(got, want) {
		t.Fatalf("base\n got %q\nwant %q", got, want)
	}
	// Key group 3 has its watermark row already.
	if d := snapshot(t, b, mem, false); d != nil {
		t.Fatalf("delta without changes: %q", snapRows(t, d))
	}
	tm.Register(EventTime, Timer{Timestamp: 5, KeyGroup: 1, Key: "d"})
	d1 := snapshot(t, b, mem, false)
	defer releaseAll(d1)
	want = []string{
		`1 __timers_event "d" "" - 5 false`,
		`1 __timers_watermark "" "" - 20 false`,
	}
	if got := snapRows(t, d1); !slices.Equal(got, want) {
		t.Fatalf("delta 1\n got %q\nwant %q", got, want)
	}
	tm.AdvanceWatermark(30)
	d2 := snapshot(t, b, mem, false)
	defer releaseAll(d2)
	want = []string{
		`1 __timers_event "d" "" - 5 true`,
		`3 __timers_event "c" "" - 15 true`,
	}
	if got := snapRows(t, d2); !slices.Equal(got, want) {
		t.Fatalf("delta 2\n got %q\nwant %q", got, want)
	}

	dst := NewMemory(0, 4)
	restoreAll(t, dst, [][]arrow.RecordBatch{base, d1})
	if wm, n := dst.Timers().Watermark(), dst.Timers().Len(EventTime); wm != 20 || n != 3 {
		t.Errorf("restored watermark %d, %d timers", wm, n)
	}
	// Only key group 3's part (rescaling): it knows the watermark too.
	part := NewMemory(3, 4)
	for _, r := range base {
		sl := r.NewSlice(1, 3)
		err := part.Restore(sl)
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if wm := part.Timers().Watermark(); wm != 20 {
		t.Errorf("key group 3 restored watermark %d", wm)
	}
	// The new watermark is what timers pop at.
	if got := dst.Timers().AdvanceWatermark(20); len(got) != 2 || dst.Timers().Watermark() != 20 {
		t.Errorf("popped %v", got)
	}
}

func TestSnapshotRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewMemory(2, 6)
	n, _ := OpenTable[int64](b, "n", nil)
	s, _ := OpenTable[string](b, "s", nil)
	if recs := snapshot(t, b, mem, true); recs != nil {
		t.Fatalf("empty backend gave %d batches", len(recs))
	}
	n.Put(3, "b", "", 1)
	n.Put(3, "a", "w", 2)
	n.Put(2, "z", "", 3)
	s.Put(3, "a", "", "hi")
	s.Put(5, "gone", "", "x")
	s.Delete(5, "gone", "")
	b.Timers().Register(EventTime, Timer{Timestamp: 20, KeyGroup: 3, Key: "a"})
	b.Timers().Register(EventTime, Timer{Timestamp: 10, KeyGroup: 3, Key: "b"})
	b.Timers().Register(ProcessingTime, Timer{Timestamp: 7, KeyGroup: 2, Key: "z", Namespace: "w"})

	base := snapshot(t, b, mem, true)
	defer releaseAll(base)
	want := []string{
		`2 n "z" "" 0300000000000000 - false`,
		`2 __timers_processing "z" "w" - 7 false`,
		`3 n "b" "" 0100000000000000 - false`, // a table's entries in the order they were made
		`3 n "a" "w" 0200000000000000 - false`,
		`3 s "a" "" 6869 - false`,
		`3 __timers_event "b" "" - 10 false`,
		`3 __timers_event "a" "" - 20 false`,
	}
	if got := snapRows(t, base); !slices.Equal(got, want) {
		t.Fatalf("base\n got %q\nwant %q", got, want)
	}
	if !base[0].Schema().Equal(SnapshotSchema()) || SnapshotSchema().Field(0).Name != "key_group" {
		t.Errorf("schema %s", base[0].Schema())
	}
	// The base took the changes: a delta now is empty.
	if d := snapshot(t, b, mem, false); d != nil {
		t.Fatalf("delta after base: %q", snapRows(t, d))
	}

	n.Put(3, "b", "", 5)     // changed
	n.Delete(3, "a", "w")    // deleted
	s.Put(4, "tmp", "", "t") // written then deleted: a deletion
	s.Delete(4, "tmp", "")
	s.Put(3, "a", "", "hi") // rewritten with the same value: still in the delta
	b.Timers().AdvanceWatermark(10)
	b.Timers().Delete(ProcessingTime, Timer{Timestamp: 7, KeyGroup: 2, Key: "z", Namespace: "w"})
	b.Timers().Register(EventTime, Timer{Timestamp: 30, KeyGroup: 5, Key: "c"})
	delta := snapshot(t, b, mem, false)
	defer releaseAll(delta)
	want = []string{
		`2 __timers_processing "z" "w" - 7 true`,
		`3 n "b" "" 0500000000000000 - false`,
		`3 n "a" "w" - - true`,
		`3 s "a" "" 6869 - false`,
		`3 __timers_event "b" "" - 10 true`,
		`4 s "tmp" "" - - true`,
		`5 __timers_event "c" "" - 30 false`,
	}
	if got := snapRows(t, delta); !slices.Equal(got, want) {
		t.Fatalf("delta\n got %q\nwant %q", got, want)
	}

	// The snapshot does not change with the backend.
	before := snapRows(t, delta)
	n.Put(3, "b", "", 99)
	s.Put(3, "a", "", "changed")
	b.Timers().AdvanceWatermark(100)
	if got := snapRows(t, delta); !slices.Equal(got, before) {
		t.Errorf("delta changed with the backend\n got %q\nwant %q", got, before)
	}
}

func TestSnapshotBatchLimit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewMemory(0, 2)
	b.batchBytes = 100
	s, _ := OpenTable[string](b, "s", nil)
	for i := range 10 {
		s.Put(i%2, fmt.Sprint("k", i), "", strings.Repeat("v", 30))
	}
	s.Put(1, "big", "", strings.Repeat("v", 500)) // alone in its batch, over the limit
	recs := snapshot(t, b, mem, true)
	defer releaseAll(recs)
	if len(recs) < 4 || countRows(recs) != 11 {
		t.Fatalf("%d batches of %d rows", len(recs), countRows(recs))
	}
	dst := NewMemory(0, 2)
	ds, _ := OpenTable[string](dst, "s", nil)
	restoreAll(t, dst, [][]arrow.RecordBatch{recs})
	if v, _ := ds.Get(1, "big", ""); len(v) != 500 || ds.Len(0)+ds.Len(1) != 11 {
		t.Errorf("restored %d+%d entries", ds.Len(0), ds.Len(1))
	}
}

func TestRestoreRefusesForeignKeyGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := NewMemory(0, 8)
	n, _ := OpenTable[int64](src, "counts", nil)
	n.Put(5, "in", "", 1)
	n.Put(7, "out", "", 2)
	src.Timers().Register(EventTime, Timer{Timestamp: 1, KeyGroup: 3, Key: "t"})
	recs := snapshot(t, src, mem, true)
	defer releaseAll(recs)

	dst := NewMemory(4, 7)
	dn, _ := OpenTable[int64](dst, "counts", nil)
	err := dst.Restore(recs[0])
	if want := `statestore: restore row 0: table "__timers_event": key group 3 is outside the backend's key groups [4,7)`; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	// Nothing of a refused batch is applied.
	if dn.Len(5) != 0 || dst.Timers().Len(EventTime) != 0 {
		t.Error("a refused batch was partly applied")
	}
	// Filtered to the backend's range the same rows restore.
	dst = NewMemory(3, 6)
	dn, _ = OpenTable[int64](dst, "counts", nil)
	part := recs[0].NewSlice(0, 2)
	err = dst.Restore(part)
	part.Release()
	if err != nil {
		t.Fatal(err)
	}
	err = dst.Restore(recs[0])
	if want := `statestore: restore row 2: table "counts": key group 7 is outside the backend's key groups [3,6)`; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if v, ok := dn.Get(5, "in", ""); !ok || v != 1 || dst.Timers().Len(EventTime) != 1 {
		t.Errorf("restored %d %v, %d timers", v, ok, dst.Timers().Len(EventTime))
	}
}

func TestRestoreRefusesBadBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	build := func(kg []int32, table []string, value [][]byte, ts []*int64, deleted []bool) arrow.RecordBatch {
		rb := array.NewRecordBuilder(mem, SnapshotSchema())
		defer rb.Release()
		for i := range kg {
			rb.Field(colKeyGroup).(*array.Int32Builder).Append(kg[i])
			rb.Field(colTable).(*array.StringBuilder).Append(table[i])
			rb.Field(colKey).(*array.BinaryBuilder).AppendString("k")
			rb.Field(colNamespace).(*array.StringBuilder).Append("")
			if value[i] == nil {
				rb.Field(colValue).AppendNull()
			} else {
				rb.Field(colValue).(*array.BinaryBuilder).Append(value[i])
			}
			if ts[i] == nil {
				rb.Field(colTimestamp).AppendNull()
			} else {
				rb.Field(colTimestamp).(*array.Int64Builder).Append(*ts[i])
			}
			rb.Field(colDeleted).(*array.BooleanBuilder).Append(deleted[i])
		}
		return rb.NewRecordBatch()
	}
	one := int64(1)
	for _, c := range []struct {
		name string
		rec  arrow.RecordBatch
		want string
	}{
		{"no value", build([]int32{1}, []string{"n"}, [][]byte{nil}, []*int64{nil}, []bool{false}),
			`statestore: restore row 0: table "n", key group 1: an entry without a value`},
		{"timer without time", build([]int32{1}, []string{EventTimersTable}, [][]byte{nil}, []*int64{nil}, []bool{false}),
			`statestore: restore row 0: table "__timers_event": a timer without a timestamp`},
		{"unknown reserved", build([]int32{1}, []string{"__timers_x"}, [][]byte{nil}, []*int64{&one}, []bool{false}),
			`statestore: restore row 0: table "__timers_x": unknown reserved table name`},
		{"undecodable", build([]int32{1}, []string{"n"}, [][]byte{{1, 2}}, []*int64{nil}, []bool{false}),
			`statestore: restore row 0: table "n", key group 1, key "k", namespace "": statestore: decode int64: 2 bytes, want 8`},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.rec.Release()
			b := NewMemory(0, 4)
			if _, err := OpenTable[int64](b, "n", nil); err != nil {
				t.Fatal(err)
			}
			if err := b.Restore(c.rec); err == nil || err.Error() != c.want {
				t.Errorf("error %v\nwant %s", err, c.want)
			}
		})
	}

	other := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "key_group", Type: arrow.PrimitiveTypes.Int32}}, nil))
	defer other.Release()
	rec := other.NewRecordBatch()
	defer rec.Release()
	if err := NewMemory(0, 4).Restore(rec); err == nil || !strings.Contains(err.Error(), "is not the snapshot schema") {
		t.Errorf("another schema: %v", err)
	}
}

func TestOpenTableAfterRestore(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := NewMemory(0, 4)
	s, _ := OpenTable[string](src, "s", nil)
	s.Put(1, "a", "", "abc")
	s.Put(2, "b", "", "defghijk")
	recs := snapshot(t, src, mem, true)
	s.Put(1, "a", "", "new")
	s.Delete(2, "b", "")
	delta := snapshot(t, src, mem, false)

	dst := NewMemory(0, 4)
	restoreAll(t, dst, [][]arrow.RecordBatch{recs, delta})
	releaseAll(recs) // the backend keeps no reference to the batches
	releaseAll(delta)
	if got := dst.TableNames(); len(got) != 0 {
		t.Errorf("tables before OpenTable: %v", got)
	}
	// The wrong type: "abc" is no int64. The table stays pending.
	_, err := OpenTable[int64](dst, "s", nil)
	if want := `statestore: table "s": restored entry in key group 1, key "a", namespace "": statestore: decode int64: 3 bytes, want 8`; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	ds, err := OpenTable[string](dst, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := ds.Get(1, "a", ""); v != "new" || ds.Len(2) != 0 {
		t.Errorf("restored %q, %d entries in key group 2", v, ds.Len(2))
	}
	if d := dst.TakeDirty(); len(d) != 0 {
		t.Errorf("restored entries are dirty: %v", d)
	}
}

func TestReservedTableNames(t *testing.T) {
	b := NewMemory(0, 1)
	for _, n := range []string{EventTimersTable, ProcessingTimersTable, "__timers"} {
		if _, err := OpenTable[int64](b, n, nil); !errors.Is(err, ErrInvalidName) {
			t.Errorf("OpenTable(%q): %v", n, err)
		}
	}
	if _, err := OpenTable[int64](b, "__other", nil); err != nil {
		t.Errorf("__other: %v", err)
	}
}

// failCodec encodes int64 but refuses negative values.
type failCodec struct{}

func (failCodec) Append(dst []byte, v int64) ([]byte, error) {
	if v < 0 {
		return dst, errors.New("negative")
	}
	return Int64Codec.Append(dst, v)
}
func (failCodec) Decode(b []byte) (int64, error) { return Int64Codec.Decode(b) }

func TestSnapshotErrorKeepsChanges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewMemory(0, 4)
	n, _ := OpenTable[int64](b, "n", failCodec{})
	n.Put(0, "a", "", 1)
	n.Put(3, "bad", "", -1)
	b.Timers().Register(EventTime, Timer{Timestamp: 5, KeyGroup: 1, Key: "t"})
	_, err := b.Snapshot(mem, false)
	if want := `statestore: snapshot of table "n", key group 3: key "bad", namespace "": negative`; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	n.Put(3, "bad", "", 2)
	recs := snapshot(t, b, mem, false)
	defer releaseAll(recs)
	want := []string{
		`0 n "a" "" 0100000000000000 - false`,
		`1 __timers_event "t" "" - 5 false`,
		`3 n "bad" "" 0200000000000000 - false`,
	}
	if got := snapRows(t, recs); !slices.Equal(got, want) {
		t.Errorf("delta after a failed one\n got %q\nwant %q", got, want)
	}
}

// TestSnapshotIncrementalSize: a delta of 1% of the keys is 1% of a base.
func TestSnapshotIncrementalSize(t *testing.T) {
	keys := 1_000_000
	if raceEnabled {
		keys = 200_000
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const maxP = 128
	b := NewMemory(0, maxP)
	tab, _ := OpenTable[int64](b, "count", nil)
	type k struct {
		kg  int
		key string
	}
	ks := make([]k, keys)
	t0 := time.Now()
	for i := range ks {
		ks[i] = k{arrowfmt.KeyGroup(arrowfmt.HashKeyValues(int64(i)), maxP), string(arrowfmt.AppendKey(nil, int64(i)))}
		tab.Put(ks[i].kg, ks[i].key, "", int64(i))
	}
	t1 := time.Now()
	base := snapshot(t, b, mem, true)
	defer releaseAll(base)
	t2 := time.Now()

	changed, deleted := keys/100, keys/1000
	for i := range changed {
		tab.Put(ks[i].kg, ks[i].key, "", int64(-i))
	}
	for i := changed; i < changed+deleted; i++ {
		tab.Delete(ks[i].kg, ks[i].key, "")
	}
	t3 := time.Now()
	delta := snapshot(t, b, mem, false)
	defer releaseAll(delta)
	t4 := time.Now()
	if n := countRows(base); n != keys {
		t.Errorf("base has %d rows, want %d", n, keys)
	}
	if n := countRows(delta); n != changed+deleted {
		t.Errorf("delta has %d rows, want %d", n, changed+deleted)
	}

	size := func(recs []arrow.RecordBatch, opts ...ipc.Option) int {
		var buf bytes.Buffer
		w, err := ipc.NewFileWriter(&buf, append(opts, ipc.WithSchema(SnapshotSchema()), ipc.WithAllocator(mem))...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	baseRaw, deltaRaw := size(base), size(delta)
	baseZ, deltaZ := size(base, ipc.WithZstd()), size(delta, ipc.WithZstd())
	t.Logf("%d keys: base %d rows, %d bytes (%d zstd); delta %d rows (%d changed, %d deleted), %d bytes (%d zstd): %.2f%% of the base (%.2f%% zstd)",
		keys, countRows(base), baseRaw, baseZ, countRows(delta), changed, deleted, deltaRaw, deltaZ,
		100*float64(deltaRaw)/float64(baseRaw), 100*float64(deltaZ)/float64(baseZ))
	t.Logf("put %v, base snapshot %v, changes %v, delta snapshot %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3))
	if deltaRaw*50 > baseRaw {
		t.Errorf("delta %d bytes is more than 2%% of the base's %d", deltaRaw, baseRaw)
	}

	// And they restore.
	dst := NewMemory(0, maxP)
	dt, _ := OpenTable[int64](dst, "count", nil)
	restoreAll(t, dst, [][]arrow.RecordBatch{base, delta})
	total := 0
	for kg := range maxP {
		total += dt.Len(kg)
	}
	if total != keys-deleted {
		t.Errorf("restored %d entries, want %d", total, keys-deleted)
	}
	for _, i := range []int{0, changed - 1, changed, changed + deleted, keys - 1} {
		got, ok := dt.Get(ks[i].kg, ks[i].key, "")
		want, wantOK := tab.Get(ks[i].kg, ks[i].key, "")
		if got != want || ok != wantOK {
			t.Errorf("key %d: restored %d %v, want %d %v", i, got, ok, want, wantOK)
		}
	}
}

// heapCells returns the cells a heap table keeps in key group kg,
// tombstones included, and checks its count of tombstones.
func heapCells(t *testing.T, tab Table[int64], kg int) int {
	t.Helper()
	h := tab.(*heapTable[int64])
	g := h.group(kg)
	var live, dead int
	for _, c := range g.cells {
		switch c.state {
		case cellLive:
			live++
		case cellAbsent:
			dead++
		}
	}
	if live != g.live || dead != g.dead {
		t.Fatalf("key group %d: %d entries and %d tombstones, counted %d and %d", kg, live, dead, g.live, g.dead)
	}
	return live + dead
}

// TestHeapTombstones: a deleted heap entry is kept (a tombstone) while a
// dirty set needs it, is listed once per epoch however often it comes
// and goes, and goes once the snapshot that writes it is done; a
// capture that fails after letting it go gives it back.
func TestHeapTombstones(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewMemory(0, 4)
	n, _ := OpenTable[int64](b, "n", failCodec{})

	// Churn within epochs: each key once in a delta, and nothing kept.
	for epoch := range 20 {
		for i := range 50 {
			k := fmt.Sprint("k", i)
			n.Put(0, k, "", int64(epoch))
			n.Delete(0, k, "")
			n.Put(0, k, "", int64(epoch))
			if i%2 == 0 {
				n.Delete(0, k, "")
			}
		}
		if got := n.Len(0); got != 25 {
			t.Fatalf("epoch %d: Len %d, want 25", epoch, got)
		}
		recs := snapshot(t, b, mem, false)
		if got := countRows(recs); got != 50 {
			t.Fatalf("epoch %d: a delta of %d rows, want 50 (each key once)", epoch, got)
		}
		releaseAll(recs)
		if got := heapCells(t, n, 0); got != 25 {
			t.Fatalf("epoch %d: %d cells after the delta, want the 25 entries", epoch, got)
		}
	}
	// Deleting what is gone changes nothing.
	n.Delete(0, "k0", "")
	if d := b.TakeDirty(); len(d) != 0 {
		t.Fatalf("TakeDirty after deleting a deleted key: %v", d)
	}

	// A delta that fails in key group 3, after writing (and letting go
	// of) the tombstone of key group 0: the next delta still deletes it.
	n.Delete(0, "k1", "")
	n.Put(3, "bad", "", -1)
	c, err := b.BeginSnapshot(mem, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(time.Time{}); err == nil {
		t.Fatal("a value its codec refuses was captured")
	}
	n.Put(3, "bad", "", 2)
	recs := snapshot(t, b, mem, false)
	want := []string{
		`0 n "k1" "" - - true`,
		`3 n "bad" "" 0200000000000000 - false`,
	}
	if got := snapRows(t, recs); !slices.Equal(got, want) {
		t.Errorf("delta after a failed one\n got %q\nwant %q", got, want)
	}
	releaseAll(recs)

	// The same, but the tombstone is put again once written: the next
	// delta holds its new value, once.
	n.Delete(0, "k5", "")
	n.Put(3, "bad", "", -1)
	if c, err = b.BeginSnapshot(mem, false); err != nil {
		t.Fatal(err)
	}
	if done, err := c.Step(time.Now().Add(-time.Second)); done || err != nil {
		t.Fatalf("the first step: done %v, error %v; want key group 0 written, no more", done, err)
	}
	n.Put(0, "k5", "", 7)
	if _, err := c.Step(time.Time{}); err == nil {
		t.Fatal("a value its codec refuses was captured")
	}
	n.Put(3, "bad", "", 3)
	recs = snapshot(t, b, mem, false)
	want = []string{
		`0 n "k5" "" 0700000000000000 - false`,
		`3 n "bad" "" 0300000000000000 - false`,
	}
	if got := snapRows(t, recs); !slices.Equal(got, want) {
		t.Errorf("delta after a failed one\n got %q\nwant %q", got, want)
	}
	releaseAll(recs)
	if got := heapCells(t, n, 0); got != 24 {
		t.Fatalf("%d cells, want the 24 entries", got)
	}

	// A capture dropped unfinished loses its dirty sets (the next
	// snapshot is a base, by contract); its tombstones go with the
	// base.
	n.Delete(0, "k7", "")
	c, err = b.BeginSnapshot(mem, false)
	if err != nil {
		t.Fatal(err)
	}
	c.Release()
	if got := heapCells(t, n, 0); got != 24 {
		t.Fatalf("%d cells after a dropped capture, want the 23 entries and a tombstone", got)
	}
	releaseAll(snapshot(t, b, mem, true))
	if got := heapCells(t, n, 0); got != 23 {
		t.Fatalf("%d cells after a base, want the 23 entries", got)
	}
}
