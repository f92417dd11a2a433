package statestore

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/statestore/offheap"
)

func TestTableGetPutDelete(t *testing.T) {
	b := NewMemory(4, 8)
	tab, err := OpenTable[int64](b, "count", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.Get(4, "a", ""); ok {
		t.Fatal("empty table has an entry")
	}
	tab.Put(4, "a", "", 1)
	tab.Put(4, "a", "w1", 2) // another namespace of the same key
	tab.Put(7, "a", "", 3)   // the same key in another key group is another entry
	for _, c := range []struct {
		kg     int
		key    string
		ns     string
		want   int64
		wantOK bool
	}{
		{4, "a", "", 1, true},
		{4, "a", "w1", 2, true},
		{7, "a", "", 3, true},
		{5, "a", "", 0, false},
		{4, "b", "", 0, false},
	} {
		got, ok := tab.Get(c.kg, c.key, c.ns)
		if got != c.want || ok != c.wantOK {
			t.Errorf("Get(%d,%q,%q) = %d,%v; want %d,%v", c.kg, c.key, c.ns, got, ok, c.want, c.wantOK)
		}
	}
	if n := tab.Len(4); n != 2 {
		t.Errorf("Len(4) = %d, want 2", n)
	}
	tab.Delete(4, "a", "")
	if _, ok := tab.Get(4, "a", ""); ok {
		t.Error("deleted entry still there")
	}
	if v, _ := tab.Get(4, "a", "w1"); v != 2 {
		t.Errorf("delete touched another namespace: %d", v)
	}
	tab.Delete(4, "nope", "") // absent: no-op

	seen := map[string]int64{}
	tab.Range(4, func(key, ns string, v int64) bool {
		seen[key+"/"+ns] = v
		return true
	})
	if want := map[string]int64{"a/w1": 2}; !reflect.DeepEqual(seen, want) {
		t.Errorf("Range(4) = %v, want %v", seen, want)
	}
}

func TestTableRangeStopsAndDeletes(t *testing.T) {
	b := NewMemory(0, 1)
	tab, _ := OpenTable[string](b, "s", nil)
	for _, k := range []string{"a", "b", "c", "d"} {
		tab.Put(0, k, "", k)
	}
	n := 0
	tab.Range(0, func(string, string, string) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("Range went on after false: %d calls", n)
	}
	tab.Range(0, func(key, ns, _ string) bool {
		tab.Delete(0, key, ns)
		return true
	})
	if tab.Len(0) != 0 {
		t.Errorf("Len after deleting in Range = %d", tab.Len(0))
	}
}

func TestTableKeyGroupOutOfRangePanics(t *testing.T) {
	b := NewMemory(4, 8)
	tab, _ := OpenTable[int64](b, "x", nil)
	for _, kg := range []int{3, 8, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Put in key group %d did not panic", kg)
				}
			}()
			tab.Put(kg, "k", "", 1)
		}()
	}
}

func TestOpenTableRegistry(t *testing.T) {
	b := NewMemory(0, 2)
	a1, err := OpenTable[float64](b, "avg", nil)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := OpenTable[float64](b, "avg", nil)
	if err != nil || a1 != a2 {
		t.Fatalf("reopening with the same type: %p %p %v", a1, a2, err)
	}
	_, err = OpenTable[int64](b, "avg", nil)
	if !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("reopening with another type: err = %v, want ErrTypeMismatch", err)
	}
	if want := `statestore: table type mismatch: "avg" holds float64, not int64`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if _, err := OpenTable[int64](b, "", nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("empty name: err = %v", err)
	}
	if _, err := OpenTable[[]int64](b, "hist", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := b.TableNames(), []string{"avg", "hist"}; !reflect.DeepEqual(got, want) {
		t.Errorf("TableNames = %v, want %v", got, want)
	}
	if _, ok := a1.Codec().(float64Codec); !ok {
		t.Errorf("default codec of float64 is %T", a1.Codec())
	}
}

func TestTakeDirty(t *testing.T) {
	b := NewMemory(10, 14)
	tab, _ := OpenTable[int64](b, "n", nil)
	other, _ := OpenTable[string](b, "other", nil)
	if d := tab.TakeDirty(); len(d) != 0 {
		t.Fatalf("new table dirty: %v", d)
	}
	tab.Put(12, "b", "", 1)
	tab.Put(11, "z", "", 1)
	tab.Put(12, "a", "ns", 1)
	tab.Put(12, "a", "ns", 2) // written twice: once in the set
	tab.Put(13, "gone", "", 1)
	tab.Delete(13, "gone", "")  // written then deleted: dirty, absent
	tab.Delete(10, "never", "") // deleting what is absent changes nothing
	_, _ = tab.Get(12, "b", "") // reads do not dirty

	want := []Scope{{11, "z", ""}, {12, "a", "ns"}, {12, "b", ""}, {13, "gone", ""}}
	if got := tab.TakeDirty(); !reflect.DeepEqual(got, want) {
		t.Fatalf("TakeDirty = %v, want %v", got, want)
	}
	if got := tab.TakeDirty(); len(got) != 0 {
		t.Fatalf("TakeDirty after TakeDirty = %v, want none", got)
	}
	// After the take, only new changes show, including deletes of old entries.
	tab.Delete(12, "b", "")
	other.Put(10, "k", "", "v")
	got := b.TakeDirty()
	wantB := []Dirty{
		{Table: "n", Scopes: []Scope{{12, "b", ""}}},
		{Table: "other", Scopes: []Scope{{10, "k", ""}}},
	}
	if !reflect.DeepEqual(got, wantB) {
		t.Fatalf("Backend.TakeDirty = %v, want %v", got, wantB)
	}
	if got := b.TakeDirty(); len(got) != 0 {
		t.Fatalf("Backend.TakeDirty after take = %v", got)
	}
}

// TestEncodedRoundTrip goes through the type-erased path snapshots will
// use: encode every dirty entry of every table, restore into a fresh
// backend, and compare.
func TestEncodedRoundTrip(t *testing.T) {
	type hist struct {
		Counts []int64
		Mean   float64
	}
	src := NewMemory(0, 4)
	i64, _ := OpenTable[int64](src, "i64", nil)
	f64, _ := OpenTable[float64](src, "f64", nil)
	str, _ := OpenTable[string](src, "str", nil)
	bl, _ := OpenTable[bool](src, "bool", nil)
	h, _ := OpenTable[hist](src, "hist", nil)
	m, _ := OpenTable[map[float64]string](src, "map", MapCodec[float64, string]{})
	i64.Put(0, "k", "", math.MinInt64)
	f64.Put(1, "k", "", -1.5)
	str.Put(2, "k", "", "héllo\x00")
	bl.Put(3, "k", "", true)
	h.Put(3, "k", "w", hist{Counts: []int64{1, 2, 3}, Mean: 2})
	m.Put(1, "k", "", map[float64]string{1.5: "a", -2: "b"})

	dst := NewMemory(0, 4)
	for _, name := range []string{"i64", "f64", "str", "bool", "hist", "map"} {
		switch name {
		case "i64":
			_, _ = OpenTable[int64](dst, name, nil)
		case "f64":
			_, _ = OpenTable[float64](dst, name, nil)
		case "str":
			_, _ = OpenTable[string](dst, name, nil)
		case "bool":
			_, _ = OpenTable[bool](dst, name, nil)
		case "hist":
			_, _ = OpenTable[hist](dst, name, nil)
		case "map":
			_, _ = OpenTable[map[float64]string](dst, name, MapCodec[float64, string]{})
		}
	}
	for _, d := range src.TakeDirty() {
		for _, s := range d.Scopes {
			enc, ok, err := src.tables[d.Table].appendEncoded(nil, s.KeyGroup, s.Key, s.Namespace)
			if err != nil || !ok {
				t.Fatalf("encode %s %v: ok=%v err=%v", d.Table, s, ok, err)
			}
			if err := dst.tables[d.Table].putEncoded(s.KeyGroup, s.Key, s.Namespace, enc); err != nil {
				t.Fatalf("decode %s %v: %v", d.Table, s, err)
			}
		}
	}
	if d := dst.TakeDirty(); len(d) != 0 {
		t.Errorf("restored entries are dirty: %v", d)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: restored %#v, want %#v", name, got, want)
		}
	}
	v1, _ := OpenTable[int64](dst, "i64", nil)
	g1, _ := v1.Get(0, "k", "")
	check("i64", g1, int64(math.MinInt64))
	v2, _ := OpenTable[float64](dst, "f64", nil)
	g2, _ := v2.Get(1, "k", "")
	check("f64", g2, -1.5)
	v3, _ := OpenTable[string](dst, "str", nil)
	g3, _ := v3.Get(2, "k", "")
	check("str", g3, "héllo\x00")
	v4, _ := OpenTable[bool](dst, "bool", nil)
	g4, _ := v4.Get(3, "k", "")
	check("bool", g4, true)
	v5, _ := OpenTable[hist](dst, "hist", nil)
	g5, _ := v5.Get(3, "k", "w")
	check("hist", g5, hist{Counts: []int64{1, 2, 3}, Mean: 2})
	v6, _ := OpenTable[map[float64]string](dst, "map", nil)
	g6, _ := v6.Get(1, "k", "")
	check("map", g6, map[float64]string{1.5: "a", -2: "b"})

	if _, ok, _ := src.tables["i64"].appendEncoded(nil, 0, "absent", ""); ok {
		t.Error("absent entry encoded")
	}
}

func TestCodecs(t *testing.T) {
	roundTrip(t, Int64Codec, []int64{0, -1, math.MaxInt64, math.MinInt64})
	roundTrip(t, Float64Codec, []float64{0, -0.5, math.Inf(1), math.MaxFloat64})
	roundTrip(t, StringCodec, []string{"", "zone", "\xff\x00"})
	roundTrip(t, BoolCodec, []bool{true, false})
	roundTrip[[]int64](t, JSONCodec[[]int64]{}, [][]int64{nil, {1, 2}})
	roundTrip[map[int64]bool](t, MapCodec[int64, bool]{}, []map[int64]bool{{}, {1: true, -5: false}})

	if _, err := Int64Codec.Decode([]byte{1, 2}); err == nil {
		t.Error("short int64 decoded")
	}
	if _, err := BoolCodec.Decode([]byte{2}); err == nil {
		t.Error("bool 2 decoded")
	}
	if _, err := (JSONCodec[float64]{}).Append(nil, math.NaN()); err == nil {
		t.Error("NaN encoded as JSON")
	}
	// Equal maps encode equally whatever their iteration order.
	m := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
	first, _ := MapCodec[string, int]{}.Append(nil, m)
	for range 20 {
		again, _ := MapCodec[string, int]{}.Append(nil, m)
		if string(again) != string(first) {
			t.Fatalf("map encoding not deterministic: %s vs %s", first, again)
		}
	}
	if want := `[["a",1],["b",2],["c",3],["d",4],["e",5]]`; string(first) != want {
		t.Errorf("map encoding %s, want %s", first, want)
	}

	type named int64
	if _, ok := DefaultCodec[named]().(JSONCodec[named]); !ok {
		t.Errorf("DefaultCodec of a named int64 = %T, want JSONCodec", DefaultCodec[named]())
	}
	if _, ok := DefaultCodec[any]().(JSONCodec[any]); !ok {
		t.Errorf("DefaultCodec[any] = %T, want JSONCodec", DefaultCodec[any]())
	}
}

func roundTrip[V any](t *testing.T, c Codec[V], vals []V) {
	t.Helper()
	for _, v := range vals {
		b, err := c.Append([]byte("prefix"), v)
		if err != nil {
			t.Fatalf("%T.Append(%v): %v", c, v, err)
		}
		got, err := c.Decode(b[len("prefix"):])
		if err != nil {
			t.Fatalf("%T.Decode(%v): %v", c, v, err)
		}
		if !reflect.DeepEqual(got, v) && !(reflect.ValueOf(v).Kind() == reflect.Map && reflect.ValueOf(v).Len() == 0 && reflect.ValueOf(got).Len() == 0) {
			t.Errorf("%T: %#v round-tripped to %#v", c, v, got)
		}
	}
}

func BenchmarkTablePutGet(b *testing.B) {
	be := NewMemory(0, 128)
	tab, _ := OpenTable[int64](be, "n", nil)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = string(rune('a'+i%26)) + string(rune(i))
	}
	for i := 0; b.Loop(); i++ {
		k := keys[i%len(keys)]
		kg := i % 128
		v, _ := tab.Get(kg, k, "")
		tab.Put(kg, k, "", v+1)
		if i%100000 == 0 {
			tab.TakeDirty()
		}
	}
}

// TestHeapTableRandom checks a heap table's storage (cells.go) against a
// map: keys of every length, sharing their first 8 bytes or not, with and
// without namespaces, put, deleted and let go (TakeDirty drops the
// tombstones) over many rounds, so that the index grows, is rebuilt
// without dropped slots and the arena is compacted. Strings the table
// handed out earlier must not change.
func TestHeapTableRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	b := NewMemory(0, 2)
	tab, _ := OpenTable[int64](b, "n", nil)
	h := tab.(*heapTable[int64])
	type held struct{ k, ns, want string }
	var (
		model    = map[Scope]int64{}
		kept     []held
		compacts int
	)
	key := func() (string, string) {
		n := r.IntN(400)
		var k string
		switch r.IntN(4) {
		case 0:
			k = fmt.Sprint(n) // short
		case 1:
			k = "sharedprefix-" + fmt.Sprint(n) // equal first 8 bytes
		case 2:
			k = strings.Repeat("x", n%20) // "" too
		default:
			k = string([]byte{byte(n), 0, byte(n >> 8)})
		}
		return k, []string{"", "", "ns", "sharedprefix-ns"}[r.IntN(4)]
	}
	for round := range 60 {
		for range 500 {
			kg := r.IntN(2)
			k, ns := key()
			s := Scope{KeyGroup: kg, Key: k, Namespace: ns}
			switch op := r.IntN(10); {
			case op < 6:
				v := r.Int64()
				tab.Put(kg, k, ns, v)
				model[s] = v
			case op < 9:
				tab.Delete(kg, k, ns)
				delete(model, s)
			default:
				got, ok := tab.Get(kg, k, ns)
				want, wantOK := model[s]
				if got != want || ok != wantOK {
					t.Fatalf("round %d: Get%v = %d, %v, want %d, %v", round, s, got, ok, want, wantOK)
				}
			}
		}
		if round%5 == 4 { // delete most entries
			for s := range model {
				if r.IntN(10) < 8 {
					tab.Delete(s.KeyGroup, s.Key, s.Namespace)
					delete(model, s)
				}
			}
		}
		arenas := [2]int{len(h.groups[0].arena), len(h.groups[1].arena)}
		if round%3 != 2 {
			tab.TakeDirty() // the tombstones go
		}
		for g := range h.groups {
			if len(h.groups[g].arena) < arenas[g] {
				compacts++
			}
		}
		got := map[Scope]int64{}
		for kg := range 2 {
			tab.Range(kg, func(k, ns string, v int64) bool {
				got[Scope{KeyGroup: kg, Key: k, Namespace: ns}] = v
				if r.IntN(50) == 0 {
					kept = append(kept, held{k, ns, strings.Clone(k) + "/" + strings.Clone(ns)})
				}
				return true
			})
			n := 0
			for s := range model {
				if s.KeyGroup == kg {
					n++
				}
			}
			if l := tab.Len(kg); l != n {
				t.Fatalf("round %d: Len(%d) = %d, want %d", round, kg, l, n)
			}
		}
		if !reflect.DeepEqual(got, model) {
			t.Fatalf("round %d: Range gives %d entries, want %d: they differ", round, len(got), len(model))
		}
	}
	for _, k := range kept {
		if got := k.k + "/" + k.ns; got != k.want {
			t.Fatalf("a key handed out changed: %q, was %q", got, k.want)
		}
	}
	if compacts == 0 {
		t.Error("no arena was compacted")
	}
	t.Logf("%d entries, %d compactions, index %d and %d slots", len(model), compacts, len(h.groups[0].index), len(h.groups[1].index))
}

// TestHeapTableTagCollision: two keys with the same first 8 bytes, the
// same length, the same 32-bit hash tag and the same slot in an index of
// 8 (found by search: the seed is the process's) are told apart by their
// bytes.
func TestHeapTableTagCollision(t *testing.T) {
	seen := map[uint64]string{}
	var a, b string
	for i := 0; i < 1_000_000 && a == ""; i++ {
		k := fmt.Sprintf("sharedprefix-%07d", i)
		h := hashKey(k, "")
		tag := h>>32<<3 | h&7
		if o, ok := seen[tag]; ok {
			a, b = o, k
		}
		seen[tag] = k
	}
	if a == "" {
		t.Fatal("no two keys of a million share a hash tag")
	}
	tab, _ := OpenTable[string](NewMemory(0, 1), "n", nil)
	tab.Put(0, a, "", a)
	tab.Put(0, b, "", b)
	for _, k := range []string{a, b} {
		if v, ok := tab.Get(0, k, ""); !ok || v != k {
			t.Errorf("Get(%q) = %q, %v", k, v, ok)
		}
	}
	if n := tab.Len(0); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
}

// TestHeapTableOffHeap fills a table past what stays on the Go heap: a
// table of int64 keeps its cells and index outside it, one of strings
// only its index; both keep every entry through growth, deletes and
// reuse of cells, and Close gives the memory back.
func TestHeapTableOffHeap(t *testing.T) {
	const n = 40_000 // 40-byte cells: 1.6 MB, mapped from 64 KiB on
	b := NewMemory(0, 1)
	ints, _ := OpenTable[int64](b, "ints", nil)
	strs, _ := OpenTable[string](b, "strs", nil)
	hi, hs := ints.(*heapTable[int64]), strs.(*heapTable[string])
	if !hi.groups[0].offCells || hs.groups[0].offCells {
		t.Fatalf("cells off the heap: int64 %v, string %v; want true, false", hi.groups[0].offCells, hs.groups[0].offCells)
	}
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	for i := range n {
		ints.Put(0, key(i), "", int64(i))
		strs.Put(0, key(i), "", key(i))
	}
	for i := 0; i < n; i += 2 {
		ints.Delete(0, key(i), "")
		strs.Delete(0, key(i), "")
	}
	for i := n; i < n+n/4; i++ { // into freed cells, and past them
		ints.Put(0, key(i), "", int64(i))
		strs.Put(0, key(i), "", key(i))
	}
	for i := range n + n/4 {
		vi, oki := ints.Get(0, key(i), "")
		vs, oks := strs.Get(0, key(i), "")
		want := i%2 == 1 || i >= n
		if oki != want || oks != want || want && (vi != int64(i) || vs != key(i)) {
			t.Fatalf("key %d: ints %d, %v; strs %q, %v; want present %v", i, vi, oki, vs, oks, want)
		}
	}
	cells := cap(hi.groups[0].cells) * int(unsafe.Sizeof(cell[int64]{}))
	index := len(hi.groups[0].index) * 8
	if got := hi.mem.Mapped(); got < cells+index {
		t.Errorf("int64 table: %d bytes mapped, want its cells' %d and its index's %d", got, cells, index)
	}
	// The string table's cells hold pointers, so stay on the heap; its
	// index and its dirty list (cell positions) do not.
	index, dirty := len(hs.groups[0].index)*8, cap(hs.groups[0].dirty)*4
	if got := hs.mem.Mapped(); got < index+dirty || got >= index+dirty+offheap.MinMapped {
		t.Errorf("string table: %d bytes mapped, want its index's %d and its dirty list's %d alone", got, index, dirty)
	}
	b.Close()
	if hi.mem.Mapped() != 0 || hs.mem.Mapped() != 0 {
		t.Errorf("after Close: %d and %d bytes mapped", hi.mem.Mapped(), hs.mem.Mapped())
	}
	b.Close() // twice is safe
}

// TestCaptureCopiesOffTheHeap: a capture of a heap table in steps keeps
// the copies of entries changed before the walk reached them outside the
// Go heap (cellCopies), and the dirty lists too (heapTable.mark); both
// are given back when the capture ends. The capture still equals a
// snapshot taken at the barrier, for a delta and for a base.
func TestCaptureCopiesOffTheHeap(t *testing.T) {
	const n = 20_000 // a dirty list of 80 KB, copies' slots of 512 KiB
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			var tabs [2]*heapTable[int64]
			var backends [2]*Memory
			for j := range backends {
				backends[j] = NewMemory(0, 1)
				defer backends[j].Close()
				tab, err := OpenTable[int64](backends[j], "ints", nil)
				if err != nil {
					t.Fatal(err)
				}
				tabs[j] = tab.(*heapTable[int64])
				for i := range n {
					tab.Put(0, fmt.Sprintf("k%d", i), "", int64(i))
				}
			}
			g := &tabs[1].groups[0]
			if mapped, want := tabs[1].mem.Mapped(), len(g.index)*8+cap(g.cells)*int(unsafe.Sizeof(g.cells[0]))+cap(g.dirty)*4; mapped < want {
				t.Fatalf("the table maps %d bytes, want its index, cells and dirty list (%d)", mapped, want)
			}
			want, err := backends[0].Snapshot(memory.DefaultAllocator, full)
			if err != nil {
				t.Fatal(err)
			}
			capture, err := backends[1].BeginSnapshot(memory.DefaultAllocator, full)
			if err != nil {
				t.Fatal(err)
			}
			c := capture.(*memCapture)
			taken := cap(c.tables[0].views[0].dirty.(*heapDirty[int64]).cells) * 4
			// Every entry changes before the walk: a delete, a put of a
			// new value, or a new key beside it.
			for i := range n {
				k := fmt.Sprintf("k%d", i)
				switch i % 3 {
				case 0:
					tabs[1].Delete(0, k, "")
				case 1:
					tabs[1].Put(0, k, "", -1)
				default:
					tabs[1].Put(0, k+"-new", "", 7)
				}
			}
			copies := c.tables[0].views[0].copies.n
			if wantCopies := n * 2 / 3; copies < wantCopies || c.mem.Mapped() == 0 {
				t.Fatalf("%d copies, %d bytes mapped for them; want at least %d copies, mapped", copies, c.mem.Mapped(), wantCopies)
			}
			// The entries that were there are counted; a new key's
			// absence at the barrier (a base) is no copy of a row.
			if got, want := c.Copies(), (CopyCounts{Rows: n - n/3}); got != want {
				t.Errorf("Copies() = %+v, want %+v: the entries deleted or changed", got, want)
			}
			before := tabs[1].mem.Mapped()
			for {
				done, err := c.Step(time.Now().Add(time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				if done {
					break
				}
			}
			if got, want := renderRows(c.Batches()), renderRows(want); got != want {
				t.Fatalf("the capture differs from the snapshot at the barrier:\n%.2000s\nwant\n%.2000s", got, want)
			}
			c.Release()
			if m := c.mem.Mapped(); m != 0 {
				t.Errorf("%d bytes of copies still mapped after the capture", m)
			}
			// The dirty list handed to the capture is unmapped.
			if m := tabs[1].mem.Mapped(); m != before-taken {
				t.Errorf("the table maps %d bytes after the capture, %d before its end: want the %d of the dirty list it took unmapped", m, before, taken)
			}
		})
	}
}

func renderRows(batches []arrow.RecordBatch) string {
	var b strings.Builder
	for _, r := range batches {
		j, _ := r.MarshalJSON()
		b.Write(j)
		r.Release()
	}
	return b.String()
}

// TestPrefetch: Prefetch reads ahead in a table only once it is large, for
// keys present or not and key groups outside the backend's, and changes
// nothing a lookup sees.
func TestPrefetch(t *testing.T) {
	b := NewMemory(0, 4)
	defer b.Close()
	tab, err := OpenTable[int64](b, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		tab.Put(i%4, fmt.Sprint("k", i), "", int64(i))
	}
	h := tab.(*heapTable[int64])
	groups := []int{0, 1, 2, 3, 3, 9}
	keys := []string{"k0", "k1", "k2", "k3", "absent", "k9"}
	b.Prefetch(groups, keys)
	if h.prefetched != 0 {
		t.Fatalf("a table of %d bytes was read ahead (under %d)", h.footprint(), prefetchMinBytes)
	}
	defer func(old int) { prefetchMinBytes = old }(prefetchMinBytes)
	prefetchMinBytes = 0
	b.Prefetch(groups, keys)
	if h.prefetched == 0 {
		t.Fatal("nothing read ahead in a table over prefetchMinBytes")
	}
	for i := range 1000 {
		if v, ok := tab.Get(i%4, fmt.Sprint("k", i), ""); !ok || v != int64(i) {
			t.Fatalf("key %d: %d, %v after Prefetch", i, v, ok)
		}
	}
}
