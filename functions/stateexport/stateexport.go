// Package stateexport writes the keyed state one operator holds in a
// checkpoint as a plain table, in an open format (Parquet, or an Arrow IPC
// file) that DuckDB, pandas, Polars or Spark read. It is `weir state
// export`.
//
// A checkpoint keeps an operator's state as chains of files: per subtask a
// base and then deltas, each in the operator's own state schema, whose
// rows say how to change the state (replace a key's windows, forget a
// join row, delete a table entry). `weir state dump` prints those rows as
// they are. Export instead rebuilds the state as of the checkpoint and
// writes it once, one row per window, kept join row, table entry or timer:
// for each subtask it restores the subtask's files exactly as a worker
// restores them after a failure (task.RestoreStateFile into the operator,
// instantiated from the job's spec), captures the result as a base, and
// writes the base's rows without the columns that only say how to apply
// them. Memory use is that of restoring the largest subtask.
//
// The table's columns, by operator kind:
//
//	window    key_group, <keyBy columns>, window_start, window_end,
//	          emitted, pending, <aggregate>__count and <aggregate>__sum,
//	          __min or __max (each aggregate's accumulator)
//	join      key_group, side (left or right), left.<column>...,
//	          right.<column>... (a row has its side's columns, nulls in
//	          the other's)
//	function  key_group, table, <keyBy columns>, namespace, value,
//	          timestamp: a table entry has the value its state's codec
//	          encoded (an int64 as 8 bytes little-endian, a struct as JSON
//	          text) and a null timestamp; a timer has table
//	          __timers_event or __timers_processing, a null value and its
//	          time in milliseconds
//
// The key is decoded into the operator's keyBy columns, with their names
// and types (a name another column holds gets a suffix: _2, _3...).
package stateexport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/arrowfmt/parquetfmt"
	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
)

// Format is a file format Export writes.
type Format string

const (
	// Parquet is a zstd-compressed Parquet file with the Arrow schema
	// stored in it (parquetfmt).
	Parquet Format = "parquet"
	// Arrow is an Arrow IPC file (the random-access format, .arrow).
	Arrow Format = "arrow"
)

// ParseFormat returns the format called s.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case Parquet, Arrow:
		return f, nil
	}
	return "", fmt.Errorf("format %q: want parquet or arrow", s)
}

// Request is what to export.
type Request struct {
	// Bucket holds the checkpoint's state files.
	Bucket blob.BucketReader
	// Manifest is the checkpoint's.
	Manifest *manifest.Manifest
	// Plan is the job's spec (jobs/<job>/spec.json) planned: it gives the
	// operator's kind, state schema and key types.
	Plan *plan.Plan
	// Operator names the operator whose state to export.
	Operator string
	// Mem allocates the restored state and the batches written;
	// memory.DefaultAllocator if nil.
	Mem memory.Allocator
}

// Result counts what Export read and wrote.
type Result struct {
	Rows     int64 // rows written
	Subtasks int   // subtasks with state of the operator
	Files    int   // state files read (a file two subtasks list is read by each)
	Bytes    int64 // bytes of the state files read
}

// Export writes the state of r.Operator in r.Manifest's checkpoint to w
// in format f (see the package doc). It fails, before writing anything,
// if the checkpoint holds no state of the operator; a file that does not
// match the manifest (size, SHA-256) or does not decode fails it with
// task.ErrCorruptState, naming the file.
func Export(ctx context.Context, r Request, w io.Writer, f Format) (Result, error) {
	var res Result
	if r.Mem == nil {
		r.Mem = memory.DefaultAllocator
	}
	subtasks, err := stateOf(r.Manifest, r.Operator)
	if err != nil {
		return res, err
	}
	n := r.Plan.Node(r.Operator)
	if n == nil || n.Kind != plan.KindOperator {
		return res, fmt.Errorf("the job spec has no operator %q", r.Operator)
	}
	x, err := newExporter(r.Plan, n)
	if err != nil {
		return res, fmt.Errorf("operator %s: %w", r.Operator, err)
	}
	out, err := newWriter(w, f, x.schema)
	if err != nil {
		return res, err
	}
	for _, st := range subtasks {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := x.subtask(ctx, r, st, out, &res); err != nil {
			return res, fmt.Errorf("operator %s, subtask %d: %w", r.Operator, st.index, err)
		}
		res.Subtasks++
	}
	if err := out.Close(); err != nil {
		return res, err
	}
	return res, nil
}

// subtaskState is one subtask's files of the operator, in apply order, and
// the key groups it restores from them.
type subtaskState struct {
	index, parallelism int
	kgStart, kgEnd     int
	files              []manifest.File
}

// stateOf returns the subtasks of m that list state files of operator,
// with the key groups a worker of the subtask restores (the files may be
// wider after a rescale).
func stateOf(m *manifest.Manifest, operator string) ([]subtaskState, error) {
	var out []subtaskState
	var ops []string
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			st := subtaskState{index: s.Index, parallelism: v.Parallelism}
			st.kgStart, st.kgEnd = arrowfmt.KeyGroupRange(s.Index, m.MaxParallelism, v.Parallelism)
			for _, f := range s.State {
				if f.Operator == operator {
					st.files = append(st.files, f)
				} else if !slices.Contains(ops, f.Operator) {
					ops = append(ops, f.Operator)
				}
			}
			if len(st.files) > 0 {
				out = append(out, st)
			}
		}
	}
	switch {
	case len(out) > 0:
		return out, nil
	case m.Final:
		return nil, fmt.Errorf("checkpoint %d of job %s has no state: it is the final checkpoint, written when the job's input was complete", m.Checkpoint, m.Job)
	case len(ops) == 0:
		return nil, fmt.Errorf("checkpoint %d of job %s has no state files", m.Checkpoint, m.Job)
	}
	return nil, fmt.Errorf("checkpoint %d of job %s has no state of operator %q (operators with state: %s)", m.Checkpoint, m.Job, operator, strings.Join(ops, ", "))
}

// exporter restores one operator's subtasks and projects their bases to
// the export schema.
type exporter struct {
	p      *plan.Plan
	n      *plan.Node
	kind   string // window, join or function
	schema *arrow.Schema
	// project turns one base batch (the operator's state schema) into
	// one of schema; nil: no rows of it are exported.
	project func(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error)
}

func newExporter(p *plan.Plan, n *plan.Node) (*exporter, error) {
	x := &exporter{p: p, n: n}
	switch {
	case n.Op.Join != nil:
		x.kind = "join"
	case n.Op.Window != nil:
		x.kind = "window"
	case n.Op.Function != "":
		x.kind = "function"
	default:
		return nil, fmt.Errorf("a %s operator keeps no state", n.Op.Kind())
	}
	// The state schema, from an operator that is never opened: windows
	// and joins know theirs when they are made; a function's is the
	// backend's.
	state := statestore.SnapshotSchema()
	if x.kind != "function" {
		var op task.Operator
		var err error
		switch x.kind {
		case "window":
			// The heap's window state, also of a window on pebble
			// (exported through its HeapRows).
			op, err = builtin.NewWindow(n.Op, n.Input.ConsumerStream())
		default:
			// The heap's join state, also of a join on pebble.
			op, err = builtin.NewJoin(n.Op, n.Inputs[0].ConsumerStream(), n.Inputs[1].ConsumerStream())
		}
		if err != nil {
			return nil, err
		}
		sf, ok := op.(task.Stateful)
		if !ok {
			return nil, fmt.Errorf("the %s operator keeps no state", x.kind)
		}
		state = sf.State().Schema()
	}
	var err error
	switch x.kind {
	case "window":
		err = x.windowColumns(state)
	case "join":
		err = x.joinColumns(state)
	case "function":
		err = x.functionColumns(state)
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// subtask restores one subtask's state, captures it as a base and writes
// its rows.
func (x *exporter) subtask(ctx context.Context, r Request, st subtaskState, out batchWriter, res *Result) error {
	files, stores := task.SplitStoreFiles(st.files)
	var state statestore.Snapshotter
	var closeState func()
	var err error
	switch {
	case len(stores) > 0 && x.kind == "function":
		var b *statestore.Memory
		b, closeState, err = task.OpenStores(ctx, r.Bucket, stores, st.kgStart, st.kgEnd)
		state = b
	case len(stores) > 0 && (x.kind == "window" || x.kind == "join"):
		state, closeState, err = x.openStores(ctx, r, st, stores)
	case len(stores) > 0:
		return fmt.Errorf("the checkpoint holds files of a store, and a %s operator keeps its state in memory", x.kind)
	default:
		state, closeState, err = x.open(st, r.Mem)
	}
	if err != nil {
		return err
	}
	defer closeState()
	for _, fs := range stores {
		for _, f := range fs {
			res.Files++
			res.Bytes += f.Size
		}
	}
	for _, f := range files {
		if err := task.RestoreStateFile(ctx, r.Bucket, state, f, st.kgStart, st.kgEnd, r.Mem); err != nil {
			return err
		}
		res.Files++
		res.Bytes += f.Size
	}
	var recs []arrow.RecordBatch
	if wr, ok := state.(heapRower); ok {
		recs, err = wr.HeapRows(r.Mem)
	} else {
		recs, err = state.Snapshot(r.Mem, true)
	}
	if err != nil {
		return err
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	for _, rec := range recs {
		p, err := x.project(rec, r.Mem)
		if err != nil {
			return err
		}
		if p == nil {
			continue
		}
		res.Rows += p.NumRows()
		err = out.Write(p)
		p.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// open makes the state a worker of subtask st restores into: a function's
// backend (on the heap: the export reads it once), or the window or join
// operator itself.
func (x *exporter) open(st subtaskState, mem memory.Allocator) (statestore.Snapshotter, func(), error) {
	if x.kind == "function" {
		m := statestore.NewMemory(st.kgStart, st.kgEnd)
		return m, m.Close, nil
	}
	op, err := x.p.NewOperator(x.n)
	if err != nil {
		return nil, nil, err
	}
	if err := op.Open(openContext(x.p, x.n, st.index, st.parallelism, st.kgStart, st.kgEnd, mem)); err != nil {
		_ = op.Close()
		return nil, nil, err
	}
	return op.(task.Stateful).State(), func() { _ = op.Close() }, nil
}

// StoreRows calls fn with the state of the store whose files are files
// (one capture of window or join r.Operator on pebble, over key groups
// [files[0].KeyGroupStart, files[0].KeyGroupEnd)) as the heap's operator
// writes a base, until fn returns false or an error: what `weir state
// dump` prints of a window or join on pebble. r.Manifest is not read.
func StoreRows(ctx context.Context, r Request, files []manifest.File, fn func(arrow.RecordBatch) (bool, error)) error {
	if r.Mem == nil {
		r.Mem = memory.DefaultAllocator
	}
	n := r.Plan.Node(r.Operator)
	if n == nil || n.Kind != plan.KindOperator || n.Op.Window == nil && n.Op.Join == nil {
		return fmt.Errorf("the job spec has no window or join %q", r.Operator)
	}
	x := &exporter{p: r.Plan, n: n, kind: "window"}
	if n.Op.Join != nil {
		x.kind = "join"
	}
	st := subtaskState{parallelism: 1, kgStart: files[0].KeyGroupStart, kgEnd: files[0].KeyGroupEnd}
	state, closeState, err := x.openStores(ctx, r, st, [][]manifest.File{files})
	if err != nil {
		return err
	}
	defer closeState()
	wr, ok := state.(heapRower)
	if !ok {
		return fmt.Errorf("%s %s keeps no state in a store", x.kind, r.Operator)
	}
	recs, err := wr.HeapRows(r.Mem)
	if err != nil {
		return err
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	for _, rec := range recs {
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

// heapRower is the state of a window or join on pebble: it writes its
// state as the heap's operator writes a base.
type heapRower interface {
	HeapRows(memory.Allocator) ([]arrow.RecordBatch, error)
}

// openStores opens the window or join operator of subtask st, on
// pebble, with its store made from the captured stores, as a restore
// does.
func (x *exporter) openStores(ctx context.Context, r Request, st subtaskState, stores [][]manifest.File) (statestore.Snapshotter, func(), error) {
	state, closeOp, err := x.open(st, r.Mem)
	if err != nil {
		return nil, nil, err
	}
	sc, ok := state.(statestore.StoreCapturer)
	if !ok {
		closeOp()
		return nil, nil, fmt.Errorf("the checkpoint holds files of a store, and this job's %s %s keeps its state on the heap (state.backend)", x.kind, x.n.Name)
	}
	captured, err := task.DownloadStores(ctx, r.Bucket, sc.StoreScratch(), stores, nil)
	defer func() {
		for _, c := range captured {
			_ = os.RemoveAll(c.Dir)
		}
	}()
	if err == nil {
		_, err = sc.RestoreStores(captured)
	}
	if err != nil {
		closeOp()
		return nil, nil, err
	}
	return state, closeOp, nil
}

// openContext is the context an operator restored for export opens with:
// what it emits is dropped (nothing is processed, so nothing is).
func openContext(p *plan.Plan, n *plan.Node, subtask, parallelism, start, end int, mem memory.Allocator) *task.Context {
	return &task.Context{
		Job: p.Job.Name, Node: n.Name, Subtask: subtask, Parallelism: parallelism,
		MaxParallelism: p.Job.MaxParallelism, KeyGroupStart: start, KeyGroupEnd: end,
		Mem: mem, Logger: slog.New(slog.DiscardHandler), Now: time.Now,
		Out: discard{}, Side: func(string) task.Output { return nil }, Counters: new(task.Counters),
	}
}

type discard struct{}

func (discard) Emit(arrow.RecordBatch) error { return nil }

// batchWriter writes batches of one schema to a file.
type batchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

func newWriter(w io.Writer, f Format, schema *arrow.Schema) (batchWriter, error) {
	switch f {
	case Parquet:
		return parquetfmt.NewWriter(w, schema)
	case Arrow:
		fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
		if err != nil {
			return nil, fmt.Errorf("write arrow file: %w", err)
		}
		return fw, nil
	}
	return nil, fmt.Errorf("format %q: want parquet or arrow", f)
}
