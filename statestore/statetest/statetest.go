package statetest

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore"
)

// NewBackend returns an empty backend owning key groups [start, end). The
// suite closes nothing: a backend that holds resources releases them with
// t.Cleanup.
type NewBackend func(t *testing.T, start, end int) statestore.Backend

// Run runs the contract suite against the backends newBackend makes.
func Run(t *testing.T, newBackend NewBackend) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, NewBackend)
	}{
		{"KeyGroups", testKeyGroups},
		{"Table", testTable},
		{"OpenTable", testOpenTable},
		{"Kinds", testKinds},
		{"Timers", testTimers},
		{"Dirty", testDirty},
		{"BorrowedStrings", testBorrowedStrings},
		{"SnapshotRoundTrip", testSnapshotRoundTrip},
		{"RestoreKeyGroupRange", testRestoreKeyGroupRange},
		{"RestoreBeforeOpen", testRestoreBeforeOpen},
		{"RestoreRefuses", testRestoreRefuses},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newBackend) })
	}
}

func open[V any](t *testing.T, b statestore.Backend, name string) statestore.Table[V] {
	t.Helper()
	tab, err := statestore.OpenTable[V](b, name, nil)
	if err != nil {
		t.Fatalf("open table %q: %v", name, err)
	}
	return tab
}

func testKeyGroups(t *testing.T, nb NewBackend) {
	b := nb(t, 3, 9)
	if s, e := b.KeyGroups(); s != 3 || e != 9 {
		t.Errorf("KeyGroups() = %d, %d; want 3, 9", s, e)
	}
	if got := b.Schema().Field(0); got.Name != "key_group" || got.Type.ID() != arrow.INT32 {
		t.Errorf("first snapshot column is %s %v, want key_group int32", got.Name, got.Type)
	}
}

func testTable(t *testing.T, nb NewBackend) {
	b := nb(t, 4, 8)
	tab := open[int64](t, b, "count")
	if tab.Name() != "count" {
		t.Errorf("Name() = %q", tab.Name())
	}
	tab.Put(4, "a", "", 1)
	tab.Put(4, "a", "w1", 2) // another namespace of the same key
	tab.Put(7, "a", "", 3)   // another key group: another entry
	for _, c := range []struct {
		kg      int
		key, ns string
		want    int64
		ok      bool
	}{{4, "a", "", 1, true}, {4, "a", "w1", 2, true}, {7, "a", "", 3, true}, {5, "a", "", 0, false}, {4, "b", "", 0, false}} {
		if got, ok := tab.Get(c.kg, c.key, c.ns); got != c.want || ok != c.ok {
			t.Errorf("Get(%d, %q, %q) = %d, %v; want %d, %v", c.kg, c.key, c.ns, got, ok, c.want, c.ok)
		}
	}
	if n := tab.Len(4); n != 2 {
		t.Errorf("Len(4) = %d, want 2", n)
	}
	tab.Delete(4, "a", "")
	tab.Delete(4, "absent", "")
	seen := map[string]int64{}
	tab.Range(4, func(key, ns string, v int64) bool {
		seen[key+"/"+ns] = v
		return true
	})
	if want := map[string]int64{"a/w1": 2}; !reflect.DeepEqual(seen, want) {
		t.Errorf("Range(4) after Delete = %v, want %v", seen, want)
	}
	for _, k := range []string{"x", "y", "z"} {
		tab.Put(5, k, "", 0)
	}
	n := 0
	tab.Range(5, func(string, string, int64) bool { n++; return false })
	if n != 1 {
		t.Errorf("Range went on after false: %d calls", n)
	}
	tab.Range(5, func(key, ns string, _ int64) bool { tab.Delete(5, key, ns); return true })
	if n := tab.Len(5); n != 0 {
		t.Errorf("Len after deleting in Range = %d", n)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Put outside the key groups did not panic")
			}
		}()
		tab.Put(8, "a", "", 1)
	}()
}

func testOpenTable(t *testing.T, nb NewBackend) {
	b := nb(t, 0, 2)
	a := open[float64](t, b, "avg")
	a.Put(0, "k", "", 1.5)
	if again := open[float64](t, b, "avg"); again.Codec() == nil {
		t.Error("reopened table has no codec")
	} else if v, _ := again.Get(0, "k", ""); v != 1.5 {
		t.Errorf("reopened table reads %v, want 1.5", v)
	}
	if _, err := statestore.OpenTable[int64](b, "avg", nil); !errors.Is(err, statestore.ErrTypeMismatch) {
		t.Errorf("reopen with another type: %v, want ErrTypeMismatch", err)
	}
	for _, name := range []string{"", "__timers", "__timers_x"} {
		if _, err := statestore.OpenTable[int64](b, name, nil); !errors.Is(err, statestore.ErrInvalidName) {
			t.Errorf("OpenTable(%q): %v, want ErrInvalidName", name, err)
		}
	}
	open[string](t, b, "b")
	if got, want := b.TableNames(), []string{"avg", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("TableNames() = %v, want %v", got, want)
	}
}

type avg struct{}

func (avg) New() [2]int64                      { return [2]int64{} }
func (avg) Add(acc [2]int64, v int64) [2]int64 { return [2]int64{acc[0] + v, acc[1] + 1} }
func (avg) Result(acc [2]int64) float64        { return float64(acc[0]) / float64(acc[1]) }

// must(f())(t) is f's result, or fails t with f's error.
func must[S any](s S, err error) func(t *testing.T) S {
	return func(t *testing.T) S {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// testKinds checks the state kinds over the backend's tables, and that
// each survives a snapshot.
func testKinds(t *testing.T, nb NewBackend) {
	b := nb(t, 0, 2)
	l := must(statestore.OpenList[string](b, "l"))(t)
	m := must(statestore.OpenMap[string, int64](b, "m"))(t)
	r := must(statestore.OpenReducing(b, "r", func(a, v int64) int64 { return a + v }))(t)
	a := must(statestore.OpenAggregating[int64, [2]int64, float64](b, "a", avg{}, nil))(t)

	l.Add(0, "k", "", "x")
	l.Add(0, "k", "", "y")
	if got := l.Get(0, "k", ""); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("list = %v, want [x y]", got)
	}
	vs := []string{"p"}
	l.Update(1, "k", "", vs)
	vs[0] = "changed"
	if got := l.Get(1, "k", ""); !slices.Equal(got, []string{"p"}) {
		t.Errorf("Update kept the caller's slice: %v", got)
	}
	l.Update(1, "k", "", nil)
	if got := l.Get(1, "k", ""); got != nil {
		t.Errorf("list after an empty Update = %v, want nil", got)
	}

	m.Put(0, "k", "", "a", 1)
	m.Put(0, "k", "", "b", 2)
	m.Delete(0, "k", "", "a")
	if v, ok := m.Get(0, "k", "", "b"); v != 2 || !ok || m.Len(0, "k", "") != 1 {
		t.Errorf("map: b=%d,%v len %d; want 2,true len 1", v, ok, m.Len(0, "k", ""))
	}
	m.Put(1, "gone", "", "z", 1)
	m.Delete(1, "gone", "", "z")

	for _, v := range []int64{1, 2, 3} {
		r.Add(0, "k", "", v)
		a.Add(0, "k", "", v)
	}
	if v, ok := r.Get(0, "k", ""); v != 6 || !ok {
		t.Errorf("reducing = %d, %v; want 6, true", v, ok)
	}
	if v, ok := a.Get(0, "k", ""); v != 2 || !ok {
		t.Errorf("aggregating = %v, %v; want 2, true", v, ok)
	}
	r.Clear(0, "k", "")
	if _, ok := r.Get(0, "k", ""); ok {
		t.Error("reducing state after Clear has a value")
	}
	r.Add(1, "k", "", 7)

	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	snap := must(b.Snapshot(mem, true))(t)
	dst := nb(t, 0, 2)
	restore(t, dst, snap)
	release(snap)
	dl := must(statestore.OpenList[string](dst, "l"))(t)
	dm := must(statestore.OpenMap[string, int64](dst, "m"))(t)
	dr := must(statestore.OpenReducing(dst, "r", func(a, v int64) int64 { return a + v }))(t)
	da := must(statestore.OpenAggregating[int64, [2]int64, float64](dst, "a", avg{}, nil))(t)
	if got := dl.Get(0, "k", ""); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("restored list = %v", got)
	}
	if v, _ := dm.Get(0, "k", "", "b"); v != 2 || dm.Len(0, "k", "") != 1 || dm.Len(1, "gone", "") != 0 {
		t.Errorf("restored map: b=%d, len %d, gone len %d", v, dm.Len(0, "k", ""), dm.Len(1, "gone", ""))
	}
	if v, _ := dr.Get(1, "k", ""); v != 7 {
		t.Errorf("restored reducing = %d, want 7", v)
	}
	if v, _ := da.Get(0, "k", ""); v != 2 {
		t.Errorf("restored aggregating = %v, want 2", v)
	}
}

func testTimers(t *testing.T, nb NewBackend) {
	b := nb(t, 0, 4)
	ts := b.Timers()
	if ts.Watermark() != math.MinInt64 {
		t.Errorf("Watermark() before any = %d", ts.Watermark())
	}
	ev := func(at int64, kg int, key string) statestore.Timer {
		return statestore.Timer{Timestamp: at, KeyGroup: kg, Key: key}
	}
	for _, tm := range []statestore.Timer{ev(20, 1, "b"), ev(10, 2, "a"), ev(20, 0, "c"), ev(30, 3, "d")} {
		if !ts.Register(statestore.EventTime, tm) {
			t.Errorf("Register(%v) = false", tm)
		}
	}
	if ts.Register(statestore.EventTime, ev(10, 2, "a")) {
		t.Error("a timer registered twice")
	}
	ts.Register(statestore.ProcessingTime, ev(5, 0, "p"))
	if !ts.Contains(statestore.EventTime, ev(30, 3, "d")) || ts.Contains(statestore.ProcessingTime, ev(30, 3, "d")) {
		t.Error("Contains mixes the domains")
	}
	if !ts.Delete(statestore.EventTime, ev(30, 3, "d")) || ts.Delete(statestore.EventTime, ev(30, 3, "d")) {
		t.Error("Delete: want true once, then false")
	}
	if n, ok := ts.NextEventTime(); n != 10 || !ok {
		t.Errorf("NextEventTime() = %d, %v", n, ok)
	}
	if n, ok := ts.NextProcessing(); n != 5 || !ok {
		t.Errorf("NextProcessing() = %d, %v", n, ok)
	}
	if ts.Len(statestore.EventTime) != 3 || ts.Len(statestore.ProcessingTime) != 1 {
		t.Errorf("Len = %d, %d; want 3, 1", ts.Len(statestore.EventTime), ts.Len(statestore.ProcessingTime))
	}
	if tm, ok := ts.PopEventTime(15); !ok || tm != ev(10, 2, "a") {
		t.Errorf("PopEventTime(15) = %v, %v", tm, ok)
	}
	if _, ok := ts.PopEventTime(15); ok {
		t.Error("PopEventTime(15) popped a later timer")
	}
	// Ties fire by key group, key and namespace.
	if got, want := ts.AdvanceWatermark(25), []statestore.Timer{ev(20, 0, "c"), ev(20, 1, "b")}; !reflect.DeepEqual(got, want) {
		t.Errorf("AdvanceWatermark(25) = %v, want %v", got, want)
	}
	if ts.Watermark() != 25 {
		t.Errorf("Watermark() = %d, want 25", ts.Watermark())
	}
	if got := ts.DueProcessing(4); len(got) != 0 {
		t.Errorf("DueProcessing(4) = %v", got)
	}
	if tm, ok := ts.PopProcessing(5); !ok || tm != ev(5, 0, "p") {
		t.Errorf("PopProcessing(5) = %v, %v", tm, ok)
	}
	ts.Register(statestore.EventTime, ev(40, 2, "x"))
	var inGroup []statestore.Timer
	ts.Range(statestore.EventTime, 2, func(tm statestore.Timer) bool { inGroup = append(inGroup, tm); return true })
	if want := []statestore.Timer{ev(40, 2, "x")}; !reflect.DeepEqual(inGroup, want) {
		t.Errorf("Range(2) = %v, want %v", inGroup, want)
	}
	dirty := ts.TakeDirty()
	if len(dirty) != 6 { // a, b, c, d (deleted), x; p
		t.Errorf("TakeDirty() = %d timers, want 6: %v", len(dirty), dirty)
	}
	if d := ts.TakeDirty(); len(d) != 0 {
		t.Errorf("second TakeDirty() = %v", d)
	}
}

func testDirty(t *testing.T, nb NewBackend) {
	b := nb(t, 0, 4)
	x := open[int64](t, b, "x")
	y := open[string](t, b, "y")
	x.Put(2, "b", "", 1)
	x.Put(1, "a", "n", 1)
	x.Put(1, "c", "", 1)
	x.Delete(1, "c", "") // written then deleted: dirty, absent
	x.Delete(3, "never", "")
	y.Put(0, "k", "", "v")
	want := []statestore.Dirty{
		{Table: "x", Scopes: []statestore.Scope{{KeyGroup: 1, Key: "a", Namespace: "n"}, {KeyGroup: 1, Key: "c"}, {KeyGroup: 2, Key: "b"}}},
		{Table: "y", Scopes: []statestore.Scope{{KeyGroup: 0, Key: "k"}}},
	}
	if got := b.TakeDirty(); !reflect.DeepEqual(got, want) {
		t.Errorf("TakeDirty() = %v, want %v", got, want)
	}
	if got := b.TakeDirty(); len(got) != 0 {
		t.Errorf("second TakeDirty() = %v", got)
	}
	y.Put(0, "k2", "", "v")
	if got, want := y.TakeDirty(), []statestore.Scope{{KeyGroup: 0, Key: "k2"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Table.TakeDirty() = %v, want %v", got, want)
	}
}

// testBorrowedStrings: Get and Delete keep none of their strings, which
// may point into memory the caller reuses (a Wasm guest's): what a
// delete marks dirty is the key as it was at the call.
func testBorrowedStrings(t *testing.T, nb NewBackend) {
	b := nb(t, 0, 4)
	x := open[int64](t, b, "x")
	for _, k := range []string{"a", "b"} {
		x.Put(1, k, "ns1", 1)
	}
	b.TakeDirty()
	// A capture in steps, begun before the delete, copies the entry
	// before it goes: the copy must not keep the borrowed key either.
	var capture statestore.Capture
	if ss, ok := b.(statestore.SteppedSnapshotter); ok {
		var err error
		if capture, err = ss.BeginSnapshot(memory.DefaultAllocator, true); err != nil {
			t.Fatal(err)
		}
	}
	buf := []byte("ans1")
	borrowed := func(i, j int) string { return unsafe.String(&buf[i], j-i) }
	if _, ok := x.Get(1, borrowed(0, 1), borrowed(1, 4)); !ok {
		t.Fatal("Get(a, ns1) found nothing")
	}
	x.Delete(1, borrowed(0, 1), borrowed(1, 4))
	copy(buf, "bns2") // the caller reuses its memory
	if capture != nil {
		if _, err := capture.Step(time.Time{}); err != nil {
			t.Fatal(err)
		}
		batches := capture.Batches()
		capture.Release()
		r := nb(t, 0, 4)
		restore(t, r, batches)
		release(batches)
		want := entries{"t": {{KeyGroup: 1, Key: "a", Namespace: "ns1"}: 1, {KeyGroup: 1, Key: "b", Namespace: "ns1"}: 1}}
		if got := dump(r, open[int64](t, r, "x"), false); !reflect.DeepEqual(got, want) {
			t.Errorf("the base begun before the delete restores %v, want %v", got, want)
		}
	}
	if _, ok := x.Get(1, "a", "ns1"); ok {
		t.Error("(a, ns1) is still there after Delete")
	}
	if _, ok := x.Get(1, "b", "ns1"); !ok {
		t.Error("(b, ns1) is gone: Delete removed another entry")
	}
	want := []statestore.Dirty{{Table: "x", Scopes: []statestore.Scope{{KeyGroup: 1, Key: "a", Namespace: "ns1"}}}}
	if got := b.TakeDirty(); !reflect.DeepEqual(got, want) {
		t.Errorf("TakeDirty() = %v, want %v", got, want)
	}
}

// entries is a backend's state as plain values, to compare two backends.
type entries map[string]map[statestore.Scope]int64

func dump(b statestore.Backend, tab statestore.Table[int64], timers bool) entries {
	out := entries{"t": {}}
	start, end := b.KeyGroups()
	for kg := start; kg < end; kg++ {
		tab.Range(kg, func(key, ns string, v int64) bool {
			out["t"][statestore.Scope{KeyGroup: kg, Key: key, Namespace: ns}] = v
			return true
		})
		if !timers {
			continue
		}
		for _, d := range []statestore.Domain{statestore.EventTime, statestore.ProcessingTime} {
			name := d.String()
			if out[name] == nil {
				out[name] = map[statestore.Scope]int64{}
			}
			b.Timers().Range(d, kg, func(tm statestore.Timer) bool {
				out[name][statestore.Scope{KeyGroup: kg, Key: tm.Key, Namespace: tm.Namespace}] = tm.Timestamp
				return true
			})
		}
	}
	return out
}

func restore(t *testing.T, b statestore.Backend, batches []arrow.RecordBatch) {
	t.Helper()
	for _, rec := range batches {
		if err := b.Restore(rec); err != nil {
			t.Fatalf("restore: %v", err)
		}
	}
}

func release(batches []arrow.RecordBatch) {
	for _, r := range batches {
		r.Release()
	}
}

// testSnapshotRoundTrip takes a base and deltas while the state changes,
// and checks that a new backend restoring the chain in order has the
// same state, and that its next delta holds only later changes.
func testSnapshotRoundTrip(t *testing.T, nb NewBackend) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := nb(t, 0, 4)
	tab := open[int64](t, src, "t")
	var chain [][]arrow.RecordBatch
	defer func() {
		for _, c := range chain {
			release(c)
		}
	}()
	snap := func(full bool) {
		t.Helper()
		batches := must(src.Snapshot(mem, full))(t)
		for _, rec := range batches {
			if !rec.Schema().Equal(src.Schema()) {
				t.Fatalf("snapshot batch schema %s, want %s", rec.Schema(), src.Schema())
			}
		}
		chain = append(chain, batches)
	}
	for i := range 40 {
		tab.Put(i%4, string(rune('a'+i%7)), "", int64(i))
		src.Timers().Register(statestore.EventTime, statestore.Timer{Timestamp: int64(100 + i), KeyGroup: i % 4, Key: strconv.Itoa(i)})
	}
	snap(true)
	tab.Delete(1, "b", "")
	tab.Put(2, "new", "ns", 7)
	src.Timers().AdvanceWatermark(110)
	src.Timers().Register(statestore.ProcessingTime, statestore.Timer{Timestamp: 9, KeyGroup: 3, Key: "p"})
	snap(false)
	tab.Put(2, "new", "ns", 8)
	snap(false)
	if d := src.TakeDirty(); len(d) != 0 {
		t.Errorf("TakeDirty() after a snapshot = %v", d)
	}
	if delta := must(src.Snapshot(mem, false))(t); len(delta) != 0 {
		t.Errorf("a delta without changes has %d batches", len(delta))
		release(delta)
	}

	dst := nb(t, 0, 4)
	dtab := open[int64](t, dst, "t")
	for _, c := range chain {
		restore(t, dst, c)
	}
	if got, want := dump(dst, dtab, true), dump(src, tab, true); !reflect.DeepEqual(got, want) {
		t.Errorf("restored state differs:\n got %v\nwant %v", got, want)
	}
	if d := dst.TakeDirty(); len(d) != 0 {
		t.Errorf("restored rows are dirty: %v", d)
	}
	if delta := must(dst.Snapshot(mem, false))(t); len(delta) != 0 {
		t.Errorf("a delta right after a restore has %d batches", len(delta))
		release(delta)
	}
	dtab.Put(0, "after", "", 1)
	delta := must(dst.Snapshot(mem, false))(t)
	defer release(delta)
	rows := 0
	for _, r := range delta {
		rows += int(r.NumRows())
	}
	if rows != 1 {
		t.Errorf("delta after one Put has %d rows, want 1", rows)
	}
}

// keep returns the rows of the batches in key groups [start, end), as the
// runtime filters state files for a subtask after a rescale.
func keep(batches []arrow.RecordBatch, start, end int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for _, rec := range batches {
		kg := rec.Column(0).(*array.Int32)
		var parts [][2]int64
		for i := range kg.Len() {
			if g := int(kg.Value(i)); g >= start && g < end {
				if n := len(parts); n > 0 && parts[n-1][1] == int64(i) {
					parts[n-1][1]++
				} else {
					parts = append(parts, [2]int64{int64(i), int64(i) + 1})
				}
			}
		}
		for _, p := range parts {
			out = append(out, rec.NewSlice(p[0], p[1]))
		}
	}
	return out
}

// testRestoreKeyGroupRange restores a snapshot of [0, 8) into backends of
// parts of the range, as after a rescale: each has exactly its key groups'
// entries and timers.
func testRestoreKeyGroupRange(t *testing.T, nb NewBackend) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := nb(t, 0, 8)
	tab := open[int64](t, src, "t")
	for kg := range 8 {
		tab.Put(kg, "k", "", int64(kg))
		src.Timers().Register(statestore.EventTime, statestore.Timer{Timestamp: int64(kg), KeyGroup: kg, Key: "k"})
	}
	base := must(src.Snapshot(mem, true))(t)
	defer release(base)
	tab.Put(5, "k", "", 50)
	delta := must(src.Snapshot(mem, false))(t)
	defer release(delta)
	for _, r := range [][2]int{{0, 3}, {3, 6}, {6, 8}, {4, 5}} {
		dst := nb(t, r[0], r[1])
		dtab := open[int64](t, dst, "t")
		for _, c := range [][]arrow.RecordBatch{base, delta} {
			part := keep(c, r[0], r[1])
			restore(t, dst, part)
			release(part)
		}
		want := entries{"t": {}, statestore.EventTime.String(): {}, statestore.ProcessingTime.String(): {}}
		for kg := r[0]; kg < r[1]; kg++ {
			v := int64(kg)
			if kg == 5 {
				v = 50
			}
			want["t"][statestore.Scope{KeyGroup: kg, Key: "k"}] = v
			want[statestore.EventTime.String()][statestore.Scope{KeyGroup: kg, Key: "k"}] = int64(kg)
		}
		if got := dump(dst, dtab, true); !reflect.DeepEqual(got, want) {
			t.Errorf("key groups [%d,%d): restored %v, want %v", r[0], r[1], got, want)
		}
	}
}

// testRestoreBeforeOpen restores rows of a table before the table is
// opened: opening it then finds them, and a base taken meanwhile carries
// them on.
func testRestoreBeforeOpen(t *testing.T, nb NewBackend) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := nb(t, 0, 2)
	open[string](t, src, "s").Put(1, "k", "", "v")
	base := must(src.Snapshot(mem, true))(t)
	defer release(base)

	mid := nb(t, 0, 2)
	restore(t, mid, base)
	carried := must(mid.Snapshot(mem, true))(t)
	defer release(carried)

	dst := nb(t, 0, 2)
	restore(t, dst, carried)
	if v, ok := open[string](t, dst, "s").Get(1, "k", ""); v != "v" || !ok {
		t.Errorf("table opened after restore reads %q, %v; want v, true", v, ok)
	}
	if _, err := statestore.OpenTable[int64](nb(t, 0, 2), "s", nil); err != nil {
		t.Errorf("open in a fresh backend: %v", err)
	}
}

// testRestoreRefuses checks that Restore refuses a batch of another
// schema and rows outside the backend's key groups.
func testRestoreRefuses(t *testing.T, nb NewBackend) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := nb(t, 0, 4)
	open[int64](t, src, "t").Put(3, "k", "", 1)
	base := must(src.Snapshot(mem, true))(t)
	defer release(base)
	dst := nb(t, 0, 2)
	for _, rec := range base {
		if err := dst.Restore(rec); err == nil {
			t.Error("restored a row of key group 3 into [0,2)")
		}
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "key_group", Type: arrow.PrimitiveTypes.Int32}}, nil)
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	rb.Field(0).(*array.Int32Builder).Append(0)
	rec := rb.NewRecordBatch()
	defer rec.Release()
	if err := dst.Restore(rec); err == nil {
		t.Error("restored a batch of another schema")
	}
}
