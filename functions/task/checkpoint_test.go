package task

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
)

var testStateSchema = arrow.NewSchema([]arrow.Field{
	{Name: StateKeyGroupField, Type: arrow.PrimitiveTypes.Int32},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func testStateBatch(mem memory.Allocator, groups []int32) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testStateSchema)
	defer b.Release()
	for i, g := range groups {
		b.Field(0).(*array.Int32Builder).Append(g)
		b.Field(1).(*array.StringBuilder).Append(string(rune('a' + i%26)))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// TestKeepKeyGroups restores a state file the way a task does and keeps
// the rows of some key groups.
func TestKeepKeyGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := testStateBatch(mem, []int32{0, 5, 5, 9, 1, 7})
	defer rec.Release()
	_, data, err := statefile.Encode(manifest.File{}, testStateSchema, []arrow.RecordBatch{rec, rec}, mem, arrowfmt.CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := statefile.Decode(data, testStateSchema, mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].NumRows() != 6 || !array.RecordEqual(got[0], rec) {
		t.Fatalf("decoded %d batches, want 2 equal to the input", len(got))
	}
	// keepKeyGroups keeps [4, 8): rows 1, 2 and 5, in order.
	kept, err := keepKeyGroups(got[0], 4, 8, mem)
	if err != nil {
		t.Fatal(err)
	}
	if kept.NumRows() != 3 {
		t.Fatalf("kept %d rows, want 3", kept.NumRows())
	}
	ns := kept.Column(2).(*array.Int64)
	if ns.Value(0) != 1 || ns.Value(1) != 2 || ns.Value(2) != 5 {
		t.Errorf("kept rows n = %v, want [1 2 5]", ns)
	}
	kept.Release()
	if none, _ := keepKeyGroups(got[0], 20, 30, mem); none != nil {
		t.Error("kept rows outside every key group")
	}
	for _, b := range got {
		b.Release()
	}
}

func TestRestoreForRescale(t *testing.T) {
	file := func(op string, s, e int, kind string) manifest.File {
		return manifest.File{Key: op + "/" + kind, Operator: op, KeyGroupStart: s, KeyGroupEnd: e, Kind: kind}
	}
	wm := func(v int64) *int64 { return &v }
	m := &manifest.Manifest{Checkpoint: 7, MaxParallelism: 128, Vertices: []manifest.Vertex{
		{Name: "src", Parallelism: 2, Subtasks: []manifest.Subtask{
			{Index: 0, SourcePositions: map[string]json.RawMessage{"src": json.RawMessage(`{"position":{"next":4}}`)}},
			{Index: 1, SourcePositions: map[string]json.RawMessage{"src": json.RawMessage(`{"position":{"next":5}}`)}},
		}},
		{Name: "win", Parallelism: 2, Keyed: true, Subtasks: []manifest.Subtask{
			{Index: 0, KeyGroupEnd: 64, Watermark: wm(100), State: []manifest.File{file("win", 0, 64, "base"), file("win", 0, 64, "delta")}},
			{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 128, Watermark: wm(90), State: []manifest.File{file("win", 64, 128, "base")}},
		}},
	}}
	// Same parallelism: the subtask's own chain, continued.
	r, err := RestoreFor(m, "win", 0, 2, 0, 64, []string{"win"}, SourceRestore{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files["win"]) != 2 || !r.Continue["win"] || *r.Watermark != 100 {
		t.Errorf("same parallelism: %d files, continue %v, watermark %v", len(r.Files["win"]), r.Continue["win"], *r.Watermark)
	}
	// Rescaled to 3: subtask 1 owns [42, 85) and reads both chains, from
	// the lowest watermark.
	r, err = RestoreFor(m, "win", 1, 3, 42, 85, []string{"win"}, SourceRestore{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files["win"]) != 3 || r.Continue["win"] || *r.Watermark != 90 {
		t.Errorf("rescaled: %d files, continue %v, watermark %v", len(r.Files["win"]), r.Continue["win"], *r.Watermark)
	}
	// Sources keep their position by subtask; another parallelism is
	// refused.
	r, err = RestoreFor(m, "src", 1, 2, 0, 0, nil, SourceRestore{Name: "src"})
	if err != nil || string(r.SourcePosition) != `{"position":{"next":5}}` {
		t.Errorf("source position %s, %v", r.SourcePosition, err)
	}
	if _, err := RestoreFor(m, "src", 0, 3, 0, 0, nil, SourceRestore{Name: "src"}); err == nil {
		t.Error("a source restored at another parallelism was accepted")
	}
}

// TestRestoreForMergesSplits: a source of splits restored at another
// parallelism gets every old subtask's splits, the lowest largest event
// time, and (subtask 0 only) the dead-letter total; a split in two
// subtasks' positions, or a position that is no split position, is
// refused.
func TestRestoreForMergesSplits(t *testing.T) {
	src := func(positions ...string) *manifest.Manifest {
		m := &manifest.Manifest{Checkpoint: 7}
		v := manifest.Vertex{Name: "in", Parallelism: len(positions)}
		for i, p := range positions {
			v.Subtasks = append(v.Subtasks, manifest.Subtask{Index: i, SourcePositions: map[string]json.RawMessage{"in": json.RawMessage(p)}})
		}
		m.Vertices = []manifest.Vertex{v}
		return m
	}
	m := src(`{"position":{"splits":{"a":{"id":"1-0"}}},"maxTimestamp":100,"deadLetters":2}`,
		`{"position":{"splits":{"b":{"id":"2-0"},"c":{"id":"3-0"}}},"maxTimestamp":90,"deadLetters":3}`)
	splits := SourceRestore{Name: "in", Splits: true}
	for sub, wantDead := range []int64{5, 0, 0} {
		r, err := RestoreFor(m, "in", sub, 3, 0, 0, nil, splits)
		if err != nil {
			t.Fatal(err)
		}
		var sc sourceCheckpoint
		if err := json.Unmarshal(r.SourcePosition, &sc); err != nil {
			t.Fatal(err)
		}
		if string(sc.Position) != `{"splits":{"a":{"id":"1-0"},"b":{"id":"2-0"},"c":{"id":"3-0"}}}` || *sc.MaxTimestamp != 90 || sc.DeadLetters != wantDead {
			t.Errorf("subtask %d of 3: %s, want every split, max timestamp 90, %d dead letters", sub, r.SourcePosition, wantDead)
		}
	}
	// At its own parallelism each subtask gets every split too (one may
	// have changed owner: a listing that grew), with its own largest
	// event time and dead letters.
	if r, err := RestoreFor(m, "in", 1, 2, 0, 0, nil, splits); err != nil || string(r.SourcePosition) != `{"position":{"splits":{"a":{"id":"1-0"},"b":{"id":"2-0"},"c":{"id":"3-0"}}},"maxTimestamp":90,"deadLetters":3}` {
		t.Errorf("same parallelism: %s %v", r.SourcePosition, err)
	}
	if r, err := RestoreFor(m, "in", 0, 2, 0, 0, nil, splits); err != nil || string(r.SourcePosition) != `{"position":{"splits":{"a":{"id":"1-0"},"b":{"id":"2-0"},"c":{"id":"3-0"}}},"maxTimestamp":100,"deadLetters":2}` {
		t.Errorf("same parallelism, subtask 0: %s %v", r.SourcePosition, err)
	}
	// A checkpoint from before the source had splits restores as taken,
	// at its parallelism.
	if r, err := RestoreFor(src(`{"position":{"id":"1-0"}}`, `{"position":{"id":"2-0"}}`), "in", 1, 2, 0, 0, nil, splits); err != nil || string(r.SourcePosition) != `{"position":{"id":"2-0"}}` {
		t.Errorf("old position, same parallelism: %s %v", r.SourcePosition, err)
	}
	if _, err := RestoreFor(src(`{"position":{"splits":{"a":{}}}}`, `{"position":{"splits":{"a":{}}}}`), "in", 0, 1, 0, 0, nil, splits); err == nil || !strings.Contains(err.Error(), `split "a" is in the positions of two subtasks`) {
		t.Errorf("a split twice: %v", err)
	}
	if _, err := RestoreFor(src(`{"position":{"id":"1-0"}}`, `{"position":{"id":"2-0"}}`), "in", 0, 1, 0, 0, nil, splits); err == nil || !strings.Contains(err.Error(), "want {\"splits\"") {
		t.Errorf("not a split position: %v", err)
	}
}

// TestChainSizes: a chain restored from a checkpoint continues with the
// sizes of its base and deltas, which decide when the next base is
// taken. A capture in parts is several files: a base's parts are all of
// the base (counting the first alone made every delta after a restore
// "reach" the base's bytes and a base come at once), and the parts of a
// delta are one delta.
func TestChainSizes(t *testing.T) {
	file := func(kind string, start, end int, size int64) manifest.File {
		return manifest.File{Kind: kind, KeyGroupStart: start, KeyGroupEnd: end, Size: size}
	}
	for _, tc := range []struct {
		name         string
		files        []manifest.File
		base, deltas int64
		n            int
	}{
		{"base alone", []manifest.File{file(manifest.KindBase, 64, 128, 100)}, 100, 0, 0},
		{"whole files", []manifest.File{file(manifest.KindBase, 64, 128, 100), file(manifest.KindDelta, 64, 128, 10), file(manifest.KindDelta, 64, 128, 20)}, 100, 30, 2},
		{"parts", []manifest.File{
			file(manifest.KindBase, 64, 80, 40), file(manifest.KindBase, 80, 100, 40), file(manifest.KindBase, 100, 128, 40),
			file(manifest.KindDelta, 64, 90, 5), file(manifest.KindDelta, 90, 128, 5),
			file(manifest.KindDelta, 64, 128, 7),
		}, 120, 17, 2},
	} {
		base, deltas, n := chainSizes(tc.files, 64)
		if base != tc.base || deltas != tc.deltas || n != tc.n {
			t.Errorf("%s: base %d, deltas %d in %d captures; want %d, %d in %d", tc.name, base, deltas, n, tc.base, tc.deltas, tc.n)
		}
	}
}

// TestStoreChain: what a restored operator's chain makes of the stores
// it was restored from. A store restored anew from a capture made before
// stores merged words (kept -1 though one store over the same key groups
// was restored) must not take that capture's files as its own: its
// sstables are new files that may bear their names.
func TestStoreChain(t *testing.T) {
	for _, c := range []struct {
		name    string
		cont    bool
		n       int
		inStore bool
		kept    int
		want    int
	}{
		{"restart on the store's files", true, 1, true, 0, chainContinues},
		{"restart, the store written anew (legacy capture)", true, 1, true, -1, chainAnew},
		{"heap state from the store's rows, same key groups", true, 1, false, -1, chainContinues},
		{"heap state from two stores' rows", false, 2, false, -1, chainAnew},
		{"rescale on one of the stores", false, 3, true, 2, chainShares},
		{"rescale, every store written anew", false, 2, true, -1, chainAnew},
		{"same key groups from another subtask count", false, 1, true, 0, chainShares},
	} {
		if got := storeChain(c.cont, c.n, c.inStore, c.kept); got != c.want {
			t.Errorf("%s: storeChain(%v, %d, %v, %d) = %d, want %d", c.name, c.cont, c.n, c.inStore, c.kept, got, c.want)
		}
	}
}
