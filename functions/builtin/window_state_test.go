package builtin

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/offheap"
	"github.com/weirstream/weir/statestore/statefile"
)

// winStep is one step of an input: a batch of rows (winFields), or a
// watermark when rows is nil.
type winStep struct {
	rows [][]any
	wm   int64
}

// winSteps cuts events into random batches, each followed by the watermark
// max_ts - bound - 1.
func winSteps(rng *rand.Rand, events []winEvent, bound int64) []winStep {
	var steps []winStep
	wm, maxTs := task.MinWatermark, int64(-1<<62)
	for i := 0; i < len(events); {
		n := 1 + rng.IntN(80)
		batch := events[i:min(i+n, len(events))]
		i += len(batch)
		steps = append(steps, winStep{rows: winEventRows(batch)})
		for _, e := range batch {
			maxTs = max(maxTs, e.ts)
		}
		wm = max(wm, maxTs-bound-1)
		steps = append(steps, winStep{wm: wm})
	}
	return steps
}

// winRowGroup is the key group of an input row keyed by (k, k2).
func winRowGroup(row []any) int {
	return arrowfmt.KeyGroup(arrowfmt.HashKeyValues(row[1], row[2]), 128)
}

// step feeds s to h, only the rows of key groups [kgStart, kgEnd).
func (h *winHarness) step(s winStep, kgStart, kgEnd int) {
	h.t.Helper()
	if s.rows == nil {
		h.watermark(s.wm)
		return
	}
	var rows [][]any
	for _, row := range s.rows {
		if kg := winRowGroup(row); kg >= kgStart && kg < kgEnd {
			rows = append(rows, row)
		}
	}
	if len(rows) > 0 {
		h.batch(rows...)
	}
}

func (h *winHarness) finish() {
	h.t.Helper()
	h.watermark(task.MaxWatermark)
	if err := h.op.Finish(); err != nil {
		h.t.Fatal(err)
	}
}

// winStateRows renders state rows as winRows does, with the key group.
func winStateRows(b arrow.RecordBatch) []string {
	b = withKindNames(memory.DefaultAllocator, b)
	defer b.Release()
	kgs := b.Column(0).(*array.Int32)
	cols := b.Columns()[1:]
	rest := array.NewRecordBatch(arrow.NewSchema(b.Schema().Fields()[1:], nil), cols, b.NumRows())
	defer rest.Release()
	rows := winRows(rest)
	for r := range rows {
		rows[r] = strconv.Itoa(int(kgs.Value(r))) + " " + rows[r]
	}
	return rows
}

// withKindNames returns b with its int8 kind column (the field named
// kind) as the utf8 names of the kinds, as weir wrote window state
// before 2026-12-05; b itself if it has none.
func withKindNames(mem memory.Allocator, b arrow.RecordBatch) arrow.RecordBatch {
	i := b.Schema().FieldIndices("kind")
	if len(i) != 1 || b.Column(i[0]).DataType().ID() != arrow.INT8 {
		b.Retain()
		return b
	}
	codes := b.Column(i[0]).(*array.Int8)
	sb := array.NewStringBuilder(mem)
	defer sb.Release()
	for r := range codes.Len() {
		if codes.IsNull(r) {
			sb.AppendNull()
			continue
		}
		if c := int(codes.Value(r)); c >= 0 && c < len(windowRowKinds) {
			sb.Append(windowRowKinds[c])
		} else {
			sb.Append(strconv.Itoa(c))
		}
	}
	names := sb.NewArray()
	defer names.Release()
	fields := slices.Clone(b.Schema().Fields())
	fields[i[0]] = arrow.Field{Name: "kind", Type: arrow.BinaryTypes.String}
	cols := slices.Clone(b.Columns())
	cols[i[0]] = names
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, b.NumRows())
}

// snapshot takes a snapshot of h and returns it as an Arrow IPC file, as
// the runtime uploads it, and its rows. It keeps the batches to the end of
// the test and checks then that they did not change while h went on.
func (h *winHarness) snapshot(full bool) (file []byte, rows []string) {
	h.t.Helper()
	batches, err := h.op.(task.Stateful).State().Snapshot(h.mem, full)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.snapshotFile(batches)
}

// snapshotFile is snapshot for batches already captured.
func (h *winHarness) snapshotFile(batches []arrow.RecordBatch) (file []byte, rows []string) {
	h.t.Helper()
	st := h.op.(task.Stateful).State()
	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(st.Schema()), ipc.WithAllocator(h.mem))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, b := range batches {
		if !b.Schema().Equal(st.Schema()) {
			h.t.Fatalf("state batch schema %v, want %v", b.Schema(), st.Schema())
		}
		rows = append(rows, winStateRows(b)...)
		if err := fw.Write(b); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		h.t.Fatal(err)
	}
	// The runtime uploads the batches while the operator goes on: read
	// them concurrently (the race detector sees any memory they share with
	// the operator) and once more at the end.
	saved := slices.Clone(rows)
	read := make(chan []string, 1)
	go func() {
		var again []string
		for _, b := range batches {
			again = append(again, winStateRows(b)...)
		}
		read <- again
	}()
	h.t.Cleanup(func() {
		concurrently := <-read
		var again []string
		for _, b := range batches {
			again = append(again, winStateRows(b)...)
			b.Release()
		}
		if !slices.Equal(again, saved) || !slices.Equal(concurrently, saved) {
			h.t.Errorf("a snapshot changed after it was taken:\n%s%s", winDiff(again, saved), winDiff(concurrently, saved))
		}
	})
	return buf.Bytes(), rows
}

// snapshotPart is snapshotFile for a part of a capture, whose copies may
// be encoded already (Part.Encoded): the file is written as the runtime
// writes it, in the capture's file schema (its columns narrowed, see
// stateFileSchema) with codec, and the rows of the copies are read back
// from it.
func (h *winHarness) snapshotPart(p statestore.Part, schema *arrow.Schema, codec arrowfmt.Compression) (file []byte, rows []string) {
	h.t.Helper()
	_, rows = h.snapshotFile(p.Batches)
	var buf bytes.Buffer
	if err := arrowfmt.WriteFileEncoded(&buf, schema, p.Batches, p.Encoded, codec); err != nil {
		h.t.Fatal(err)
	}
	_, recs, err := arrowfmt.DecodeFile(buf.Bytes(), h.mem)
	if err != nil {
		h.t.Fatal(err)
	}
	for i, b := range recs {
		if i >= len(p.Batches) {
			rows = append(rows, winStateRows(b)...)
		}
		b.Release()
	}
	return buf.Bytes(), rows
}

// winStateDump renders every key's windows, sorted, as a full snapshot
// would have them, without touching the operator's change tracking.
func winStateDump(t testing.TB, h *winHarness) []string {
	t.Helper()
	w := h.op.(*windowOperator)
	var rows []string
	for _, b := range w.writeState(h.mem) {
		rows = append(rows, winStateRows(b)...)
		b.Release()
	}
	slices.Sort(rows)
	return rows
}

// inRange reports whether the key group kg (decimal) is in [start, end).
func inRange(t testing.TB, kg string, start, end int) bool {
	t.Helper()
	n, err := strconv.Atoi(kg)
	if err != nil {
		t.Fatalf("key group %q: %v", kg, err)
	}
	return n >= start && n < end
}

// restore applies snapshot files to h in order, keeping the rows of key
// groups [kgStart, kgEnd) as the runtime does.
func (h *winHarness) restore(files [][]byte, kgStart, kgEnd int) error {
	h.t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(h.t, 0)
	for _, file := range files {
		// As statefile.Decode reads it: narrowed columns widened.
		schema, recs, err := arrowfmt.DecodeFile(file, mem)
		if err != nil {
			h.t.Fatal(err)
		}
		if want := h.op.(task.Stateful).State().Schema(); !schema.Equal(want) {
			h.t.Fatalf("state file schema %v, want %v", schema, want)
		}
		var kept []arrow.RecordBatch
		for _, b := range recs {
			if k := winStateFilter(h.t, b, kgStart, kgEnd, mem); k != nil {
				if h.legacyKinds {
					legacy := withKindNames(mem, k)
					k.Release()
					k = legacy
				}
				kept = append(kept, k)
			}
			b.Release()
		}
		err = restoreFile(h.op.(task.Stateful).State(), kept)
		for _, k := range kept {
			k.Release()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// restoreFile restores the batches of one state file as the runtime
// does (task.RestoreStateFile): sized first, then batch by batch.
func restoreFile(st statestore.Snapshotter, recs []arrow.RecordBatch) error {
	if s, ok := st.(statestore.RestoreSizer); ok && len(recs) > 0 {
		s.SizeRestore(recs)
	}
	for _, b := range recs {
		if err := st.Restore(b); err != nil {
			return err
		}
	}
	return nil
}

// openCount opens a window operator that counts the rows of each value
// of schema's column key (timestamps in column 0) in hour windows. The
// caller closes it.
func openCount(tb testing.TB, schema *arrow.Schema, key string, mem memory.Allocator) *windowOperator {
	tb.Helper()
	o, err := NewWindow(winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(3_600_000)}, []string{key}, "n", "count()"), Stream{Schema: schema, TimeColumn: 0})
	if err != nil {
		tb.Fatal(err)
	}
	if err := o.Open(&task.Context{MaxParallelism: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
		tb.Fatal(err)
	}
	return o.(*windowOperator)
}

// countedSnapshot gives o the rows of rec and captures its state (full:
// a base, else a delta); the batches are released when the test ends.
func countedSnapshot(tb testing.TB, o *windowOperator, rec arrow.RecordBatch, mem memory.Allocator, full bool) []arrow.RecordBatch {
	tb.Helper()
	if err := o.ProcessBatch(rec); err != nil {
		tb.Fatal(err)
	}
	batches, err := o.State().Snapshot(mem, full)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, b := range batches {
			b.Release()
		}
	})
	return batches
}

// countKeys is a batch of openCount's input with keys keys (k), one row
// each, spread over the key groups, in one hour window.
func countKeys(schema *arrow.Schema, mem memory.Allocator, keys int) arrow.RecordBatch {
	ts, k := array.NewTimestampBuilder(mem, arrow.FixedWidthTypes.Timestamp_ms.(*arrow.TimestampType)), array.NewInt64Builder(mem)
	defer ts.Release()
	defer k.Release()
	for i := range keys {
		ts.Append(arrow.Timestamp(i % 1000))
		k.Append(int64(i) * 7919)
	}
	cols := []arrow.Array{ts.NewArray(), k.NewArray()}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(schema, cols, int64(keys))
}

// TestCopiesEncodedAtPeriodEnd: at a tumbling period's end every key
// fires and is dropped, so a capture in flight then copies every key its
// walk has not reached. Encoded as they come (EncodeWith), the copies
// take a small part of what they take built, and the parts hold the same
// rows.
func TestCopiesEncodedAtPeriodEnd(t *testing.T) {
	const keys = 100_000
	mem := memory.NewGoAllocator()
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "ts", Type: arrowfmt.TimestampMs}, {Name: "k", Type: arrowfmt.Int64}})
	if err != nil {
		t.Fatal(err)
	}
	rec := countKeys(schema, mem, keys)
	defer rec.Release()

	var built, encodedBytes, encodedRows int // the copies' bytes, as built, and encoded
	rows := map[bool][]string{}
	for _, encode := range []bool{false, true} {
		// Four key groups of 25,000 keys, as a subtask of 10M keys has
		// 78,000 in each of 128: most of a group's copies fill batches
		// of copyBatchRows, which are encoded.
		op, err := NewWindow(winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(3_600_000)}, []string{"k"}, "n", "count()"), Stream{Schema: schema, TimeColumn: 0})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Open(&task.Context{MaxParallelism: 4, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
			t.Fatal(err)
		}
		o := op.(*windowOperator)
		countedSnapshot(t, o, rec, mem, true) // changes are listed from here on
		if err := o.ProcessBatch(rec); err != nil {
			t.Fatal(err)
		}
		cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		c, err := o.State().(statestore.SteppedSnapshotter).BeginSnapshot(cmem, false)
		if err != nil {
			t.Fatal(err)
		}
		pc := c.(statestore.EncodingCapture)
		pc.SplitParts(task.DefaultPartBytes)
		if encode {
			pc.EncodeWith(arrowfmt.CompressZstd)
		}
		if err := o.ProcessWatermark(task.MaxWatermark); err != nil {
			t.Fatal(err)
		}
		// Every key was copied: the walk has not begun.
		if !encode {
			built = cmem.CurrentAlloc()
		}
		copied := 0
		for _, cr := range o.capture.cows {
			if cr != nil {
				copied += cr.held
				for _, e := range cr.encoded {
					encodedBytes += e.Len()
					encodedRows += int(e.Rows())
				}
			}
		}
		if copied != keys {
			t.Fatalf("encode %v: %d keys copied at the period's end, want %d", encode, copied, keys)
		}
		if done, err := c.Step(time.Time{}); err != nil || !done {
			t.Fatalf("the capture's last step: done %v, %v", done, err)
		}
		parts := pc.TakeParts()
		var partEncoded int64
		for _, p := range parts {
			for _, e := range p.Encoded {
				partEncoded += e.Rows()
			}
		}
		// The capture counts what it copied, and what of it it encoded.
		if got, want := c.(statestore.CopyingCapture).Copies(), (statestore.CopyCounts{Rows: keys, EncodedRows: partEncoded}); got != want {
			t.Errorf("encode %v: Copies() = %+v, want %+v", encode, got, want)
		}
		if encode != (partEncoded > 0) {
			t.Errorf("encode %v: the parts hold %d encoded rows", encode, partEncoded)
		}
		for _, p := range parts {
			var buf bytes.Buffer
			if err := arrowfmt.WriteFileEncoded(&buf, c.(statestore.NarrowingCapture).FileSchema(), p.Batches, p.Encoded, arrowfmt.CompressZstd); err != nil {
				t.Fatal(err)
			}
			for _, b := range p.Batches {
				b.Release()
			}
			_, recs, err := arrowfmt.DecodeFile(buf.Bytes(), mem)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range recs {
				rows[encode] = append(rows[encode], winStateRows(b)...)
				b.Release()
			}
		}
		c.Release()
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Built, the copies take their builders' buffers; encoded, a part of
	// the last batch of each group is built still.
	t.Logf("%d keys copied: %d bytes built; %d of them encoded in %d bytes (zstd)", keys, built, encodedRows, encodedBytes)
	if encodedRows < keys*3/4 || encodedBytes*5 > built*encodedRows/keys {
		t.Fatalf("%d of %d copies encoded, in %d bytes; built they take %d: want most encoded, in a fifth of that or less", encodedRows, keys, encodedBytes, built*encodedRows/keys)
	}
	// The same rows; a group's batches of copies, of different keys, may
	// come in another order.
	slices.Sort(rows[false])
	slices.Sort(rows[true])
	if len(rows[false]) != keys || !slices.Equal(rows[true], rows[false]) {
		t.Fatalf("the parts hold %d rows built and %d encoded, want the same %d", len(rows[false]), len(rows[true]), keys)
	}
}

// BenchmarkPeriodEndDuringCapture: a tumbling period ends (every key's
// window fires and is dropped) while a delta of every key is being
// captured and its walk has not begun, so every key is copied on write.
// It reports how long the firing took, what the copies held at its end
// (the capture's memory: mapped, including room not written to yet, on
// the heap through the allocator, and encoded), the Go heap allocated
// meanwhile, and how much the process's largest RSS grew during the
// firing (with the firings and results, which are the same either way);
// encode=true is the runtime's capture in parts with zstd (EncodeWith).
func BenchmarkPeriodEndDuringCapture(b *testing.B) {
	for _, keys := range []int{2_000_000, 10_000_000} {
		for _, encode := range []bool{false, true} {
			benchPeriodEndDuringCapture(b, keys, encode)
		}
	}
}

func benchPeriodEndDuringCapture(b *testing.B, keys int, encode bool) {
	{
		b.Run(fmt.Sprintf("keys=%d/encode=%v", keys, encode), func(b *testing.B) {
			schema := benchBidSchema(b)
			mem := memory.NewGoAllocator()
			rec := benchBids(mem, schema, keys, func(i int) (ts, auction, price int64) { return int64(i % 1000), int64(i), int64(i % 10000) })
			defer rec.Release()
			var fired time.Duration
			var held, alloc, rss float64
			for range b.N {
				b.StopTimer()
				w := openHourlyCount(b, schema, mem)
				countedSnapshot(b, w, rec, mem, true)
				if err := w.ProcessBatch(rec); err != nil {
					b.Fatal(err)
				}
				small := memory.NewCheckedAllocator(memory.NewGoAllocator())
				cmem := offheap.NewAllocator(small)
				c, err := w.State().(statestore.SteppedSnapshotter).BeginSnapshot(cmem, false)
				if err != nil {
					b.Fatal(err)
				}
				pc := c.(statestore.EncodingCapture)
				pc.SplitParts(task.DefaultPartBytes)
				if encode {
					pc.EncodeWith(arrowfmt.CompressZstd)
				}
				var before, after runtime.MemStats
				probe := startMemProbe(b)
				runtime.ReadMemStats(&before)
				b.StartTimer()
				start := time.Now()
				if err := w.ProcessWatermark(task.MaxWatermark); err != nil {
					b.Fatal(err)
				}
				fired += time.Since(start)
				b.StopTimer()
				runtime.ReadMemStats(&after)
				alloc += float64(after.TotalAlloc - before.TotalAlloc)
				rss += float64(probe.rssGrowth(b))
				h := cmem.Mapped() + small.CurrentAlloc()
				for _, cr := range w.capture.cows {
					if cr != nil {
						for _, e := range cr.encoded {
							h += e.Len()
						}
					}
				}
				held += float64(h)
				if _, err := c.Step(time.Time{}); err != nil {
					b.Fatal(err)
				}
				releaseParts(pc.TakeParts())
				c.Release()
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(fired.Milliseconds())/n, "firing-ms")
			b.ReportMetric(held/n/(1<<20), "copies-MiB")
			b.ReportMetric(alloc/n/(1<<20), "go-alloc-MiB")
			b.ReportMetric(rss/n/(1<<20), "peak-rss-growth-MiB")
		})
	}
}

// openHourlyCount opens a window operator of the benchmarks: an hourly
// tumbling count of bids by auction, its results discarded.
func openHourlyCount(b *testing.B, schema *arrow.Schema, mem memory.Allocator) *windowOperator {
	b.Helper()
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(3_600_000)}, []string{"auction"}, "bids", "count()")
	o, err := NewWindow(op, Stream{Schema: schema, TimeColumn: 0})
	if err != nil {
		b.Fatal(err)
	}
	if err := o.Open(&task.Context{MaxParallelism: 128, Mem: mem, Out: winDiscard{}, Counters: &task.Counters{}}); err != nil {
		b.Fatal(err)
	}
	return o.(*windowOperator)
}

func releaseParts(parts []statestore.Part) {
	for _, p := range parts {
		for _, b := range p.Batches {
			b.Release()
		}
	}
}

// TestRestoreSizesTables: a base's keys come sorted by their place in the
// table they were captured from (its home slots, the high bits of their
// tags). Into a table that grows as they come, the first keys all have
// homes in its first part, at a load above one there, so each insert and
// lookup probed the run of every key before it until the next growth
// spread them: a restore took time growing with the square of the keys
// in a group (5M keys: 5 s). SizeRestore grows each table to hold what
// the file brings before any row is restored, so that no table grows
// during the restore; a delta, whose keys the tables mostly hold, grows
// none.
func TestRestoreSizesTables(t *testing.T) {
	const keys = 200_000
	mem := memory.NewGoAllocator()
	schema, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "ts", Type: arrowfmt.TimestampMs}, {Name: "k", Type: arrowfmt.Int64}})
	if err != nil {
		t.Fatal(err)
	}
	newOp := func() *windowOperator {
		o := openCount(t, schema, "k", mem)
		t.Cleanup(func() { _ = o.Close() })
		return o
	}
	src := newOp()
	rec := countKeys(schema, mem, keys)
	defer rec.Release()
	base := countedSnapshot(t, src, rec, mem, true)
	dst := newOp()
	dst.State().(statestore.RestoreSizer).SizeRestore(base)
	sized := make([]int, len(dst.groups))
	for g := range dst.groups {
		sized[g] = len(dst.groups[g].slots)
		if n := src.groups[g].n; n*4 > sized[g]*3 {
			t.Fatalf("key group %d: a table of %d slots for the %d keys to come, want room for them all", g, sized[g], n)
		}
	}
	if err := restoreFile(dst.State(), base); err != nil {
		t.Fatal(err)
	}
	for g := range dst.groups {
		d, s := &dst.groups[g], &src.groups[g]
		if d.n != s.n || len(d.slots) != sized[g] {
			t.Fatalf("key group %d: %d keys in %d slots restored (sized %d), want %d keys, no growth", g, d.n, len(d.slots), sized[g], s.n)
		}
	}
	// A delta of every key (each counted again) brings no new key: the
	// tables keep their size.
	delta := countedSnapshot(t, src, rec, mem, false)
	if err := restoreFile(dst.State(), delta); err != nil {
		t.Fatal(err)
	}
	for g := range dst.groups {
		if d := &dst.groups[g]; len(d.slots) != sized[g] {
			t.Fatalf("key group %d: %d slots after a delta of keys it has, want %d", g, len(d.slots), sized[g])
		}
	}
	// The delta's walk went down change lists of several chunks (about
	// 1,600 keys a key group): every key is counted twice in both.
	got, want := sortedStateRows(dst, mem), sortedStateRows(src, mem)
	if len(got) != keys || !slices.Equal(got, want) {
		t.Fatalf("restored from a base and a delta: %d rows, want %d\n%s", len(got), len(want), winDiff(got, want))
	}
}

// sortedStateRows renders the rows of every key of o, sorted.
func sortedStateRows(o *windowOperator, mem memory.Allocator) []string {
	var rows []string
	for _, b := range o.writeState(mem) {
		rows = append(rows, winStateRows(b)...)
		b.Release()
	}
	slices.Sort(rows)
	return rows
}

// winStateFilter returns the rows of b whose key group is in [start, end),
// nil if none.
func winStateFilter(t testing.TB, b arrow.RecordBatch, start, end int, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	kgs := b.Column(0).(*array.Int32)
	var runs [][2]int
	n := 0
	for r := range int(b.NumRows()) {
		if kg := int(kgs.Value(r)); kg < start || kg >= end {
			continue
		}
		n++
		if k := len(runs); k > 0 && runs[k-1][1] == r {
			runs[k-1][1]++
		} else {
			runs = append(runs, [2]int{r, r + 1})
		}
	}
	if n == 0 {
		return nil
	}
	cols := make([]arrow.Array, b.NumCols())
	for c, col := range b.Columns() {
		parts := make([]arrow.Array, len(runs))
		for i, run := range runs {
			parts[i] = array.NewSlice(col, int64(run[0]), int64(run[1]))
		}
		var err error
		cols[c], err = array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(b.Schema(), cols, int64(n))
}

// winStateCases are windows with allowed lateness and more disorder than
// the watermark allows for, so that rows come late, within lateness
// (re-firing windows) and beyond (the late output).
var winStateCases = []spec.Window{
	{Type: spec.WindowTumbling, Size: winMs(50), AllowedLateness: winMs(30), LateOutput: "late"},
	{Type: spec.WindowTumbling, Size: winMs(20), LateOutput: "late"},
	{Type: spec.WindowSliding, Size: winMs(60), Slide: winMs(20), AllowedLateness: winMs(25), LateOutput: "late"},
	{Type: spec.WindowSession, Gap: winMs(15), AllowedLateness: winMs(20), LateOutput: "late"},
	{Type: spec.WindowSession, Gap: winMs(8), LateOutput: "late"},
}

func winStateName(w spec.Window) string {
	return fmt.Sprintf("%s/%s+%s", w.Type, w.Size+w.Slide+w.Gap, w.AllowedLateness)
}

// winSnap is a snapshot taken in a run, after steps[:cut].
type winSnap struct {
	files          [][]byte // one, or a file per part
	rows           int
	full           bool
	cut            int
	wm             int64 // the watermark at the cut
	out, late      int   // rows emitted before the cut
	fired, refired int64
	state          []string // every key's windows
}

// TestWindowStateRestore runs an input through a window operator that
// takes full and delta snapshots at many points, then for every snapshot
// restores a new operator from the base and deltas up to it, gives it the
// watermark at the cut and the rest of the input, and checks that what
// the first operator emitted before the cut and the new one after is
// exactly what an operator that never stopped emits: the same rows in the
// same order, the same late rows, the same counts of firings.
//
// Stepped, each snapshot is captured in steps (BeginSnapshot): one key per
// step after each batch and watermark, while the input goes on, and to
// the end when the next snapshot is due; what it restores must be the
// state at its barrier all the same.
func TestWindowStateRestore(t *testing.T) {
	for _, w := range winStateCases {
		for seed := range uint64(6) {
			stepped := seed >= 2
			// Seeds 4 and 5 run the input of 2 and 3 in parts of about 8
			// rows: a part per few key groups, each its own file, as the
			// runtime uploads them.
			parted := seed >= 4
			t.Run(fmt.Sprintf("%s/%d", winStateName(w), seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed-2*(seed/4), 11))
				events := winGenerate(rng, 1500, 120)
				if seed%2 == 1 {
					// Many keys: most are untouched between snapshots, so
					// that a delta misses any change not tracked.
					for i := range events {
						events[i].k += strconv.Itoa(rng.IntN(20))
					}
				}
				steps := winSteps(rng, events, 10)
				op := winOp(w, []string{"k", "k2"}, winRandomAggs...)
				in := winStream(t)

				ref := newWinHarnessRange(t, op, in, 0, 128)
				for _, s := range steps {
					ref.step(s, 0, 128)
				}
				ref.finish()
				want, wantLate := ref.out.take(), ref.late.take()
				if len(wantLate) == 0 || ref.counters.WindowsRefire.Load() == 0 && w.AllowedLateness > 0 {
					t.Fatalf("%d late rows and %d re-fires: the input does not test lateness", len(wantLate), ref.counters.WindowsRefire.Load())
				}

				// The run that snapshots, at random cuts, some between a
				// batch and its watermark; every third snapshot is full and
				// the first is a delta (since Open).
				h := newWinHarnessRange(t, op, in, 0, 128)
				h.op.(*windowOperator).captureChunk = 1
				var (
					snaps   []winSnap
					capture statestore.Capture // stepped: the snapshot being captured
					steps1  int                // steps it took
					parts   []statestore.Part  // parted: the capture's parts so far
					nparts  []int              // parted: the parts of each capture
					// stepped: captures released before their end, and
					// bases begun with dropped keys' records to sweep.
					aborted, swept int
					forceFull      bool // a capture was released: the next is a base, as the runtime's
					// parted: copies are encoded every 3 rows with codec,
					// as the runtime has them encoded; encodedRows counts
					// the rows that came so.
					codec       = []arrowfmt.Compression{arrowfmt.CompressZstd, arrowfmt.CompressLZ4}[seed%2]
					encodedRows int64
					narrowed    int // captures whose files narrow columns
				)
				wop := h.op.(*windowOperator)
				wop.copyRows = 3
				// collect adds the captured snapshot once its last step is done.
				collect := func(deadline time.Time) {
					done, err := capture.Step(deadline)
					if err != nil {
						t.Fatal(err)
					}
					steps1++
					if parted {
						parts = append(parts, capture.(statestore.PartedCapture).TakeParts()...)
					}
					if !done {
						return
					}
					snap := &snaps[len(snaps)-1]
					if !capture.(statestore.NarrowingCapture).FileSchema().Equal(wop.state.Schema) {
						narrowed++
					}
					if !parted {
						file, rows := h.snapshotPart(statestore.Part{Batches: capture.Batches()}, capture.(statestore.NarrowingCapture).FileSchema(), codec)
						snap.files, snap.rows = [][]byte{file}, len(rows)
						capture = nil
						return
					}
					if b := capture.Batches(); len(b) > 0 {
						t.Fatalf("a capture in parts handed out %d batches besides its parts", len(b))
					}
					next := 0
					for _, p := range parts {
						if p.KeyGroupStart != next || p.KeyGroupEnd <= p.KeyGroupStart {
							t.Fatalf("part [%d, %d) follows key group %d", p.KeyGroupStart, p.KeyGroupEnd, next)
						}
						next = p.KeyGroupEnd
						file, rows := h.snapshotPart(p, capture.(statestore.NarrowingCapture).FileSchema(), codec)
						for _, e := range p.Encoded {
							encodedRows += e.Rows()
						}
						for _, r := range rows {
							if kg, _, _ := strings.Cut(r, " "); !inRange(t, kg, p.KeyGroupStart, p.KeyGroupEnd) {
								t.Fatalf("part [%d, %d) has a row of key group %s: %s", p.KeyGroupStart, p.KeyGroupEnd, kg, r)
							}
						}
						snap.files = append(snap.files, file)
						snap.rows += len(rows)
					}
					if next != 128 {
						t.Fatalf("the parts end at key group %d, want 128", next)
					}
					nparts = append(nparts, len(parts))
					parts, capture = nil, nil
				}
				wm := task.MinWatermark
				var stepsTaken []int
				for i, s := range steps {
					h.step(s, 0, 128)
					if s.rows == nil {
						wm = s.wm
					}
					checkRecords(t, wop)
					checkRanges(t, wop)
					if capture != nil && stepped && rng.IntN(40) == 0 {
						// A checkpoint that fails while its capture goes on:
						// the runtime releases it, and its changes are lost
						// with it, so the next snapshot is a base.
						capture.Release()
						for _, p := range parts { // taken before: the runtime drops them
							for _, b := range p.Batches {
								b.Release()
							}
						}
						capture, parts, forceFull = nil, nil, true
						snaps = snaps[:len(snaps)-1]
						aborted++
						checkRecords(t, wop)
					}
					if capture != nil {
						collect(time.Now())
						checkRecords(t, wop)
					}
					if rng.IntN(8) != 0 {
						continue
					}
					if capture != nil {
						collect(time.Time{})
						checkRecords(t, wop)
					}
					if stepped && len(snaps) > 0 {
						stepsTaken = append(stepsTaken, steps1)
					}
					full := len(snaps)%3 == 2 || forceFull
					forceFull = false
					snap := winSnap{
						full: full, cut: i + 1, wm: wm, state: winStateDump(t, h),
						out: len(h.out.rows), late: len(h.late.rows),
						fired: h.counters.WindowsFired.Load(), refired: h.counters.WindowsRefire.Load(),
					}
					if stepped {
						var err error
						capture, err = h.op.(task.Stateful).State().(statestore.SteppedSnapshotter).BeginSnapshot(h.mem, full)
						if err != nil {
							t.Fatal(err)
						}
						if parted {
							capture.(statestore.PartedCapture).SplitParts(8 * h.op.(*windowOperator).state.RowBytes)
							capture.(statestore.EncodingCapture).EncodeWith(codec)
						}
						if full && wop.capture.dropped > 0 {
							swept++
						}
						steps1 = 0
					} else {
						file, rows := h.snapshot(full)
						snap.files, snap.rows = [][]byte{file}, len(rows)
					}
					snaps = append(snaps, snap)
				}
				h.finish()
				if capture != nil {
					collect(time.Time{})
				}
				checkRecords(t, wop)
				if stepped {
					t.Logf("%d captures released before their end, %d bases with dropped keys to sweep", aborted, swept)
					// Most captures must have gone on beside the input, or
					// the test does not test copying on write.
					if slices.Max(stepsTaken) < 10 {
						t.Fatalf("captures took %v steps: they did not go on beside the input", stepsTaken)
					}
				}
				if got := h.out.rows; !slices.Equal(got, want) {
					t.Fatalf("snapshots changed the output:\n%s", winDiff(got, want))
				}
				if len(snaps) < 5 {
					t.Fatalf("only %d snapshots", len(snaps))
				}
				if parted && slices.Max(nparts) < 3 {
					t.Fatalf("captures came in %v parts: the test does not test parts", nparts)
				}
				if parted && encodedRows == 0 {
					t.Fatal("no copy on write came encoded: the test does not test encoding them")
				}
				if parted {
					t.Logf("%d rows of copies came encoded (%s)", encodedRows, codec)
				}
				if stepped && narrowed == 0 {
					t.Fatal("no capture's files narrowed a column: the test does not test narrowed state files")
				}
				var baseRows, deltaRows, bases, deltas int
				for k, snap := range snaps {
					if snap.full {
						baseRows += snap.rows
						bases++
					} else {
						deltaRows += snap.rows
						deltas++
					}
					base := 0
					for j := k; j >= 0; j-- {
						if snaps[j].full {
							base = j
							break
						}
					}
					var files [][]byte
					for _, s := range snaps[base : k+1] {
						files = append(files, s.files...)
					}
					r := newWinHarnessRange(t, op, in, 0, 128)
					// Every other restore reads the files as weir wrote
					// them before kind was int8.
					r.legacyKinds = k%2 == 1
					if err := r.restore(files, 0, 128); err != nil {
						t.Fatalf("snapshot %d: %v", k, err)
					}
					if got := winStateDump(t, r); !slices.Equal(got, snap.state) {
						t.Fatalf("restored from snapshot %d (base %d): the state differs\n%s", k, base, winDiff(got, snap.state))
					}
					checkRanges(t, r.op.(*windowOperator))
					r.watermark(snap.wm)
					for _, s := range steps[snap.cut:] {
						r.step(s, 0, 128)
					}
					r.finish()
					got := append(slices.Clone(h.out.rows[:snap.out]), r.out.take()...)
					if !slices.Equal(got, want) {
						t.Fatalf("restored from snapshot %d (cut after step %d of %d, base %d): output differs\n%s", k, snap.cut, len(steps), base, winDiff(got, want))
					}
					gotLate := append(slices.Clone(h.late.rows[:snap.late]), r.late.take()...)
					if !slices.Equal(gotLate, wantLate) {
						t.Fatalf("restored from snapshot %d: late output differs\n%s", k, winDiff(gotLate, wantLate))
					}
					if f, rf := snap.fired+r.counters.WindowsFired.Load(), snap.refired+r.counters.WindowsRefire.Load(); f != ref.counters.WindowsFired.Load() || rf != ref.counters.WindowsRefire.Load() {
						t.Errorf("restored from snapshot %d: %d firings (%d re-fires), want %d (%d)", k, f, rf, ref.counters.WindowsFired.Load(), ref.counters.WindowsRefire.Load())
					}
				}
				t.Logf("parts %v", nparts)
				t.Logf("stepped %v: %d output rows, %d late; %d bases of %.0f rows on average, %d deltas of %.0f", stepped, len(want), len(wantLate),
					bases, float64(baseRows)/float64(max(bases, 1)), deltas, float64(deltaRows)/float64(max(deltas, 1)))
			})
		}
	}
}

// checkRanges checks that the ranges w keeps of its int64 and
// timestamp_ms state values (stateRanges) hold every such value it holds:
// a capture's files narrow its columns to them.
func checkRanges(t testing.TB, w *windowOperator) {
	t.Helper()
	batches := w.writeState(memory.NewGoAllocator())
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	held := make([]arrowfmt.Range, len(w.state.Names))
	for _, b := range batches {
		for c := range held {
			held[c].AddColumn(b.Column(c))
		}
	}
	kept := w.stateRanges()
	for c, h := range held {
		if k := kept[c]; h.Set && (!k.Set || h.Lo < k.Lo || h.Hi > k.Hi) {
			t.Fatalf("column %s holds values in [%d, %d]; the operator's range of it is %+v", w.state.Names[c], h.Lo, h.Hi, k)
		}
	}
}

// checkRecords fails unless every record of w's keys is a key of its
// tables, or a key dropped whose record a change list holds for the
// capture that takes it to free (removeKey).
func checkRecords(t testing.TB, w *windowOperator) {
	t.Helper()
	live := 0
	for g := range w.groups {
		live += w.groups[g].n
	}
	held := w.dropped
	if c := w.capture; c != nil {
		held += c.dropped - c.freed
	}
	if w.keys.Len() != live+held {
		t.Fatalf("%d key records, want %d: %d keys and %d dropped not freed yet", w.keys.Len(), live+held, live, held)
	}
	// Each lane's records are in blocks of their own, and its slots in
	// its blocks of slots (see windowOperator.laneOf).
	blocks := map[offheap.Ref]int{}
	w.eachKey(func(ks *windowKey) {
		l := w.keyLane(ks)
		b := ks.ref &^ (offheap.LaneBlock - 1)
		if o, ok := blocks[b]; ok && o != l {
			t.Fatalf("the record of a key of group %d (lane %d) is in a block of lane %d", ks.group, l, o)
		}
		blocks[b] = l
		if a := w.acc; a.lanes != nil {
			for _, win := range w.winsOf(ks) {
				if o := int(a.blockLane[win.slot>>a.laneShift]); o != l {
					t.Fatalf("slot %d of a key of group %d (lane %d) is in a block of lane %d", win.slot, ks.group, l, o)
				}
			}
		}
	})
}

// TestWindowStateRescale snapshots two subtasks (key groups [0, 64) and
// [64, 128)), restores the state into three subtasks and into one, and
// checks that the union of what they emit equals what one uninterrupted
// operator emits.
func TestWindowStateRescale(t *testing.T) {
	for _, w := range []spec.Window{winStateCases[0], winStateCases[2], winStateCases[3]} {
		t.Run(winStateName(w), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 5))
			// More keys than winGenerate's, so that every subtask has some.
			events := winGenerate(rng, 2000, 120)
			for i := range events {
				events[i].k += strconv.Itoa(rng.IntN(10))
			}
			steps := winSteps(rng, events, 10)
			op := winOp(w, []string{"k", "k2"}, winRandomAggs...)
			in := winStream(t)

			ref := newWinHarnessRange(t, op, in, 0, 128)
			for _, s := range steps {
				ref.step(s, 0, 128)
			}
			ref.finish()
			want, wantLate := ref.out.take(), ref.late.take()
			slices.Sort(want)
			slices.Sort(wantLate)

			type rng2 struct{ start, end int }
			old := []rng2{{0, 64}, {64, 128}}
			olds := make([]*winHarness, len(old))
			files := make([][][]byte, len(old))
			for i, r := range old {
				olds[i] = newWinHarnessRange(t, op, in, r.start, r.end)
			}
			// A base a third of the way, deltas at two thirds and at the
			// cut, between a batch and its watermark.
			cut := len(steps)*3/4 | 1
			wm := task.MinWatermark
			for i, s := range steps[:cut] {
				for j, h := range olds {
					h.step(s, old[j].start, old[j].end)
				}
				if s.rows == nil {
					wm = s.wm
				}
				if i == len(steps)/3 || i == len(steps)*2/3 || i == cut-1 {
					for j, h := range olds {
						file, _ := h.snapshot(i == len(steps)/3)
						files[j] = append(files[j], file)
					}
				}
			}
			if steps[cut].rows != nil {
				t.Fatal("the cut is not between a batch and its watermark")
			}
			var pre, preLate []string
			for _, h := range olds {
				pre = append(pre, h.out.take()...)
				preLate = append(preLate, h.late.take()...)
			}

			for _, p := range []int{3, 1, 2} {
				var got, gotLate []string
				got = append(got, pre...)
				gotLate = append(gotLate, preLate...)
				for i := range p {
					start, end := arrowfmt.KeyGroupRange(i, 128, p)
					h := newWinHarnessRange(t, op, in, start, end)
					// Every old subtask's checkpoint chain, each filtered to
					// this subtask's key groups.
					for j := range olds {
						if err := h.restore(files[j], start, end); err != nil {
							t.Fatal(err)
						}
					}
					h.watermark(wm)
					for _, s := range steps[cut:] {
						h.step(s, start, end)
					}
					h.finish()
					got = append(got, h.out.take()...)
					gotLate = append(gotLate, h.late.take()...)
				}
				slices.Sort(got)
				slices.Sort(gotLate)
				if !slices.Equal(got, want) {
					t.Fatalf("2 -> %d subtasks: output differs\n%s", p, winDiff(got, want))
				}
				if !slices.Equal(gotLate, wantLate) {
					t.Fatalf("2 -> %d subtasks: late output differs\n%s", p, winDiff(gotLate, wantLate))
				}
			}
			t.Logf("%d output rows, %d late, %d before the cut", len(want), len(wantLate), len(pre))
		})
	}
}

// TestWindowStateDeltaSize changes 1% of 10000 keys and checks that the
// delta has a row per changed window, 1% of the base, and that base and
// delta restore the state.
func TestWindowStateDeltaSize(t *testing.T) {
	const keys = 10000
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(1000)}, []string{"k", "k2"},
		"n", "count()", "s", "sum(v)", "hi", "max(f)")
	in := winStream(t)
	h := newWinHarnessRange(t, op, in, 0, 128)
	rows := make([][]any, keys)
	for i := range rows {
		rows[i] = []any{i % 1000, "key", i, i, float64(i)}
	}
	h.batch(rows...)
	h.watermark(100)
	base, baseRows := h.snapshot(true)
	if len(baseRows) != keys {
		t.Fatalf("base has %d rows, want %d", len(baseRows), keys)
	}

	var changed [][]any
	for i := 0; i < keys; i += 100 { // 1%
		changed = append(changed, []any{500, "key", i, 1, 0.5})
	}
	h.batch(changed...)
	h.watermark(200)
	delta, deltaRows := h.snapshot(false)
	t.Logf("base: %d rows, %d bytes; delta after changing %d keys: %d rows, %d bytes", len(baseRows), len(base), len(changed), len(deltaRows), len(delta))
	if len(deltaRows) != len(changed) {
		t.Fatalf("delta has %d rows, want %d (1%% of the base):\n%s", len(deltaRows), len(changed), strings.Join(deltaRows[:min(5, len(deltaRows))], "\n"))
	}
	for _, row := range deltaRows {
		if f := strings.Fields(row); f[3] != "replace" {
			t.Fatalf("delta row %q: want a replace row", row)
		}
	}
	if _, rows := h.snapshot(false); len(rows) != 0 {
		t.Fatalf("a delta with no change has %d rows", len(rows))
	}

	// The restored state is the state, and restoring counts as no change.
	r := newWinHarnessRange(t, op, in, 0, 128)
	if err := r.restore([][]byte{base, delta}, 0, 128); err != nil {
		t.Fatal(err)
	}
	if _, rows := r.snapshot(false); len(rows) != 0 {
		t.Fatalf("a delta right after a restore has %d rows", len(rows))
	}
	_, want := h.snapshot(true)
	_, got := r.snapshot(true)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("restored state differs:\n%s", winDiff(got, want))
	}
	r.watermark(200)
	h.finish()
	r.finish()
	if got, want := r.out.take(), h.out.take(); !slices.Equal(got, want) || len(want) != keys {
		t.Fatalf("restored output differs (%d rows, want %d):\n%s", len(got), len(want), winDiff(got, want))
	}
}

// TestWindowStateRows spells out the state of a small example: the
// schema, the rows of a base, and a delta with a fired window, a new
// window and a dropped key.
func TestWindowStateRows(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10), AllowedLateness: winMs(5)}, []string{"k"},
		"n", "count()", "s", "sum(v)", "lo", "min(f)", "first", "min(ts)", "m", "avg(v)")
	in := winStream(t)
	h := newWinHarnessRange(t, op, in, 0, 128)
	var names []string
	for _, f := range h.op.(task.Stateful).State().Schema().Fields() {
		names = append(names, f.Name+":"+f.Type.String())
	}
	wantNames := []string{"key_group:int32", "k:utf8", "kind:int8",
		"window_start:timestamp[ms, tz=UTC]", "window_end:timestamp[ms, tz=UTC]", "emitted:bool", "pending:bool",
		"n__count:int64", "s__count:int64", "s__sum:int64", "lo__count:int64", "lo__min:float64",
		"first__count:int64", "first__min:timestamp[ms, tz=UTC]", "m__count:int64", "m__sum:int64"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("state schema:\n got %v\nwant %v", names, wantNames)
	}
	kgA := arrowfmt.KeyGroup(arrowfmt.HashKeyValues("a"), 128)
	kgB := arrowfmt.KeyGroup(arrowfmt.HashKeyValues("b"), 128)
	h.batch([]any{1, "a", 0, 1, 2.5}, []any{2, "a", 0, nil, 1.5}, []any{12, "a", 0, 3, nil}, []any{14, "b", 0, nil, nil})
	_, got := h.snapshot(true)
	slices.Sort(got)
	want := []string{
		fmt.Sprintf("%d a replace 0 10 false true 2 1 1 2 1.5 2 1 1 1", kgA),
		fmt.Sprintf("%d a window 10 20 false true 1 1 3 0 null 1 12 1 3", kgA),
		fmt.Sprintf("%d b replace 10 20 false true 1 0 null 0 null 1 14 0 null", kgB),
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("base:\n got %q\nwant %q", got, want)
	}
	// [0, 10) of a fires; then it is cleaned up, and b gets a row.
	h.watermark(9)
	h.expect("0 10 a 2 1 1.5 1 1")
	_, got = h.snapshot(false)
	if want := []string{fmt.Sprintf("%d a replace 0 10 true false 2 1 1 2 1.5 2 1 1 1", kgA), fmt.Sprintf("%d a window 10 20 false true 1 1 3 0 null 1 12 1 3", kgA)}; !slices.Equal(got, want) {
		t.Fatalf("delta after firing:\n got %q\nwant %q", got, want)
	}
	h.watermark(19) // [10, 20) fires; [0, 10) is cleaned up
	h.expect("10 20 a 1 3 null 12 3", "10 20 b 1 null null 14 null")
	_, got = h.snapshot(false)
	slices.Sort(got)
	want = []string{
		fmt.Sprintf("%d a replace 10 20 true false 1 1 3 0 null 1 12 1 3", kgA),
		fmt.Sprintf("%d b replace 10 20 true false 1 0 null 0 null 1 14 0 null", kgB),
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("delta after firing and cleanup:\n got %q\nwant %q", got, want)
	}
	h.watermark(24) // cleanup of [10, 20)
	_, got = h.snapshot(false)
	slices.Sort(got)
	if want := []string{fmt.Sprintf("%d a clear null null null null null null null null null null null null null", kgA), fmt.Sprintf("%d b clear null null null null null null null null null null null null null", kgB)}; !slices.Equal(got, want) {
		t.Fatalf("delta after cleanup:\n got %q\nwant %q", got, want)
	}

	// Names the state columns take from key columns are made unique.
	s, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "ts", Type: arrowfmt.TimestampMs}, {Name: "kind", Type: arrowfmt.Int64}, {Name: "key_group", Type: arrowfmt.Bool}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewWindow(winOp(spec.Window{Type: spec.WindowSession, Gap: winMs(5)}, []string{"kind", "key_group"}, "kind__count", "count()"), Stream{Schema: s, TimeColumn: 0})
	if err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, f := range o.(task.Stateful).State().Schema().Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"key_group", "kind_2", "key_group_2", "kind", "window_start", "window_end", "emitted", "pending", "kind__count__count"}; !slices.Equal(names, want) {
		t.Errorf("state columns %v, want %v", names, want)
	}
}

// TestWindowStateErrors checks that a restore refuses what does not fit,
// naming the operator, the row and what is wrong.
// TestWindowStateRestoresOldFiles: a state file as weir wrote it before
// kind was int8 (kind as utf8 names) restores through the runtime's
// RestoreStateFile into the state it was captured from; a file of
// another schema is still refused as corrupt.
func TestWindowStateRestoresOldFiles(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10), AllowedLateness: winMs(5)}, []string{"k"}, "n", "count()", "s", "sum(v)")
	in := winStream(t)
	h := newWinHarnessRange(t, op, in, 0, 128)
	h.batch([]any{1, "a", 0, 1, 2.5}, []any{2, "a", 0, nil, 1.5}, []any{12, "a", 0, 3, nil}, []any{14, "b", 0, nil, nil}, []any{15, "c", 0, 4, nil})
	h.watermark(9) // [0, 10) of a fires: an emitted window among the rows
	batches, err := h.op.(task.Stateful).State().Snapshot(h.mem, true)
	if err != nil {
		t.Fatal(err)
	}
	var old []arrow.RecordBatch
	for _, b := range batches {
		old = append(old, withKindNames(h.mem, b))
		b.Release()
	}
	bucket, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	put := func(key string, schema *arrow.Schema, recs []arrow.RecordBatch) manifest.File {
		t.Helper()
		f, data, err := statefile.Encode(manifest.File{Key: key, Kind: manifest.KindBase, Operator: "win", KeyGroupEnd: 128}, schema, recs, h.mem, arrowfmt.CompressZstd)
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.Put(t.Context(), f.Key, data); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := put("state/old.arrow", h.op.(*windowOperator).state.legacy.Schema, old)
	for _, b := range old {
		b.Release()
	}
	r := newWinHarnessRange(t, op, in, 0, 128)
	if err := task.RestoreStateFile(t.Context(), bucket, r.op.(task.Stateful).State(), f, 0, 128, r.mem); err != nil {
		t.Fatal(err)
	}
	want := winStateDump(t, h)
	if got := winStateDump(t, r); len(want) < 4 || !slices.Equal(got, want) {
		t.Fatalf("restored from a file with kind as names:\n%s", winDiff(got, want))
	}

	other := newWinHarnessRange(t, winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()"), in, 0, 128)
	other.batch([]any{1, "a", 0, 1, 2.5})
	recs, err := other.op.(task.Stateful).State().Snapshot(other.mem, true)
	if err != nil {
		t.Fatal(err)
	}
	f = put("state/other.arrow", other.op.(task.Stateful).State().Schema(), recs)
	for _, b := range recs {
		b.Release()
	}
	r = newWinHarnessRange(t, op, in, 0, 128)
	err = task.RestoreStateFile(t.Context(), bucket, r.op.(task.Stateful).State(), f, 0, 128, r.mem)
	if !errors.Is(err, task.ErrCorruptState) || !strings.Contains(err.Error(), "columns") {
		t.Fatalf("a file of another schema: %v, want ErrCorruptState naming the columns", err)
	}
}

func TestWindowStateErrors(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()", "s", "sum(v)")
	in := winStream(t)
	h := newWinHarnessRange(t, op, in, 0, 128)
	h.batch([]any{1, "a", 0, 1, nil})
	base, _ := h.snapshot(true)
	kg := arrowfmt.KeyGroup(arrowfmt.HashKeyValues("a"), 128)
	start, end := kg+1, kg+2
	if kg == 127 {
		start, end = 0, 1
	}

	wantErr := func(name string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", name, err, w)
			}
		}
	}

	r := newWinHarnessRange(t, op, in, start, end)
	wantErr("outside the key groups", r.restore([][]byte{base}, 0, 128),
		"window win: restore state: row 0 (k=\"a\")", fmt.Sprintf("key group %d is outside this subtask's key groups [%d, %d)", kg, start, end))

	r = newWinHarnessRange(t, op, in, 0, 128)
	if err := r.restore([][]byte{base}, 0, 128); err != nil {
		t.Fatal(err)
	}
	// A base replaces every key it has: restoring it twice is restoring it
	// once. A window row adds to what is there.
	if err := r.restore([][]byte{base}, 0, 128); err != nil {
		t.Fatal(err)
	}
	st := r.op.(task.Stateful).State()
	b := winBatch(t, r.mem, st.Schema(), []any{kg, "a", "window", 0, 10, false, true, 1, 1, 1})
	defer b.Release()
	wantErr("twice", st.Restore(b), "window win: restore state: row 0 (k=\"a\")", "already has window [0, 10)")

	r.watermark(5)
	wantErr("after input", r.restore([][]byte{base}, 0, 128), "window win: restore state", "input has already come")

	// Other operators' state.
	other := newWinHarnessRange(t, winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}, []string{"k"}, "n", "count()", "s", "max(v)"), in, 0, 128)
	r = newWinHarnessRange(t, op, in, 0, 128)
	st = r.op.(task.Stateful).State()
	b = winBatch(t, other.mem, other.op.(task.Stateful).State().Schema())
	defer b.Release()
	wantErr("schema", st.Restore(b), "window win: restore state", "column 9 is s__max int64, want s__sum int64")

	other = newWinHarnessRange(t, winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(20)}, []string{"k"}, "n", "count()", "s", "sum(v)"), in, 0, 128)
	other.batch([]any{1, "a", 0, 1, nil})
	file, _ := other.snapshot(true)
	wantErr("window size", r.restore([][]byte{file}, 0, 128), `row 0 (k="a")`, "[0, 20) is not a tumbling window of size 10ms")

	bad := func(kind any, count any) arrow.RecordBatch {
		return winBatch(t, r.mem, st.Schema(), []any{kg, "a", kind, 0, 10, false, true, count, 1, 1})
	}
	b = bad(7, 1)
	defer b.Release()
	wantErr("kind", st.Restore(b), `column kind: 7 is not a row kind: want 0 (replace), 1 (window) or 2 (clear)`)
	b = winBatch(t, r.mem, r.op.(*windowOperator).state.legacy.Schema, []any{kg, "a", "merge", 0, 10, false, true, 1, 1, 1})
	defer b.Release()
	wantErr("kind of state written before it was int8", st.Restore(b), `column kind: "merge" is not a row kind`)
	b = bad("replace", nil)
	defer b.Release()
	wantErr("count", st.Restore(b), "column n__count: null")
	b = winBatch(t, r.mem, st.Schema(), []any{kg, "a", "window", 0, 10, false, true, 1, 0, 7})
	defer b.Release()
	wantErr("sum without a count", st.Restore(b), "column s__sum: 7 with s__count 0: want null")
	b = winBatch(t, r.mem, st.Schema(), []any{(kg + 1) % 128, "a", "clear", nil, nil, nil, nil, nil, nil, nil})
	defer b.Release()
	wantErr("wrong key group", st.Restore(b), fmt.Sprintf("key group %d, but the key is in key group %d of 128", (kg+1)%128, kg))
}

// TestWindowStateLowerWatermark restores a window that has fired with a
// watermark below its end, as the runtime does at another parallelism (the
// least of the old subtasks' watermarks): a row for it fires it again when
// the watermark reaches its end, not only at its cleanup.
func TestWindowStateLowerWatermark(t *testing.T) {
	op := winOp(spec.Window{Type: spec.WindowTumbling, Size: winMs(10), AllowedLateness: winMs(100)}, []string{"k"}, "n", "count()")
	in := winStream(t)
	h := newWinHarnessRange(t, op, in, 0, 128)
	h.batch([]any{1, "a", 0, 0, nil}, []any{12, "a", 0, 0, nil})
	h.watermark(9)
	h.expect("0 10 a 1")
	file, _ := h.snapshot(true)

	r := newWinHarnessRange(t, op, in, 0, 128)
	if err := r.restore([][]byte{file}, 0, 128); err != nil {
		t.Fatal(err)
	}
	r.watermark(5)
	r.batch([]any{2, "a", 0, 0, nil})
	r.expect()
	r.watermark(9)
	r.expect("0 10 a 2")
	if got := r.counters.WindowsRefire.Load(); got != 1 {
		t.Errorf("WindowsRefire = %d, want 1", got)
	}
	r.watermark(19)
	r.expect("10 20 a 1")
}

// BenchmarkKeysAfterPeriodEnd: a tumbling period's keys come in random
// order into fresh memory (fresh-ns/key), every window fires and every key
// is dropped, and the next period's keys, in another random order, are
// made again out of the records and slots the dropped keys freed
// (again-ns/key): the steady state of a job with tumbling windows. Each
// key group's lane hands its freed records out last freed first, from
// all over the lane's blocks.
func BenchmarkKeysAfterPeriodEnd(b *testing.B) {
	for _, keys := range []int{200_000, 2_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			schema := benchBidSchema(b)
			mem := memory.NewGoAllocator()
			period := func(seed uint64, start int64) arrow.RecordBatch {
				perm := rand.New(rand.NewPCG(seed, seed+1)).Perm(keys)
				return benchBids(mem, schema, keys, func(i int) (ts, auction, price int64) {
					return start + int64(i%1000), int64(perm[i]), int64(i % 10000)
				})
			}
			first, next := period(1, 0), period(3, 3_600_000)
			defer first.Release()
			defer next.Release()
			var fresh, again time.Duration
			for range b.N {
				b.StopTimer()
				o := openHourlyCount(b, schema, mem)
				start := time.Now()
				if err := o.ProcessBatch(first); err != nil {
					b.Fatal(err)
				}
				fresh += time.Since(start)
				if err := o.ProcessWatermark(3_600_000 - 1); err != nil {
					b.Fatal(err)
				}
				if n := o.keys.Len(); n != 0 {
					b.Fatalf("%d keys left after the period's end", n)
				}
				start = time.Now()
				if err := o.ProcessBatch(next); err != nil {
					b.Fatal(err)
				}
				again += time.Since(start)
				if err := o.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(fresh.Nanoseconds())/float64(b.N)/float64(keys), "fresh-ns/key")
			b.ReportMetric(float64(again.Nanoseconds())/float64(b.N)/float64(keys), "again-ns/key")
		})
	}
}

// BenchmarkPeriodEnd: a tumbling period ends and every key's window
// fires, is emitted and dropped, with no capture under way. The keys came
// in random order, as a uniform key draws them, so their records are not
// in the order the results are (by key). It reports how long the firing
// took.
func BenchmarkPeriodEnd(b *testing.B) {
	for _, keys := range []int{200_000, 2_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			schema := benchBidSchema(b)
			mem := memory.NewGoAllocator()
			perm := rand.New(rand.NewPCG(1, 2)).Perm(keys)
			rec := benchBids(mem, schema, keys, func(i int) (ts, auction, price int64) { return int64(i % 1000), int64(perm[i]), int64(i % 10000) })
			defer rec.Release()
			var fired time.Duration
			for range b.N {
				b.StopTimer()
				o := openHourlyCount(b, schema, mem)
				if err := o.ProcessBatch(rec); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := o.ProcessWatermark(task.MaxWatermark); err != nil {
					b.Fatal(err)
				}
				fired += time.Since(start)
				b.StopTimer()
				if err := o.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(fired.Nanoseconds())/float64(b.N)/float64(keys), "ns/key")
		})
	}
}
