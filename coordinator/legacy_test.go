package coordinator_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
)

// TestSavepointOfOldWindowState resumes a job from a savepoint whose
// window state files are as weir wrote them before 2026-12-05: the kind
// of each row a string (replace, window, clear) instead of an int8 code,
// and no column narrowed. The test rewrites the savepoint that way (each
// file its own object, the manifest pointing at them), so the restore
// goes through the coordinator, a worker and the bucket as an upgrade
// would; the output before the savepoint plus the output after it equals
// a run without interruption.
func TestSavepointOfOldWindowState(t *testing.T) {
	e := newEnv(t)
	e.startWorker("w1", 4, workerOpts{})
	wantW, wantS := e.reference()
	key := e.savepointAfterCheckpoint(eoSpec("first", 3000))
	firstW, firstS := e.lines("first/windows/"), e.lines("first/seq/")
	if len(firstS) == 0 || len(firstS) >= 12000 {
		t.Fatalf("%d rows before the savepoint: the stop came too early or too late", len(firstS))
	}

	raw, err := e.bucket.Get(e.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	var rewritten, rows int
	for v := range m.Vertices {
		for s := range m.Vertices[v].Subtasks {
			files := m.Vertices[v].Subtasks[s].State
			for i, f := range files {
				if f.Operator != "tumbling" || f.Kind == manifest.KindStore {
					continue
				}
				data, err := statefile.Read(e.ctx, e.bucket, f)
				if err != nil {
					t.Fatal(err)
				}
				schema, batches, err := statefile.Decode(data, nil, mem)
				if err != nil {
					t.Fatalf("%s: %v", f.Segment(), err)
				}
				old, oldBatches := withKindNames(t, schema, batches)
				for _, b := range oldBatches {
					rows += int(b.NumRows())
				}
				name := fmt.Sprintf("%sold-state-%d-%d-%d.arrow", strings.TrimSuffix(key, "manifest.json"), v, s, i)
				nf, out, err := statefile.Encode(manifest.File{Key: name, Kind: f.Kind, Operator: f.Operator,
					KeyGroupStart: f.KeyGroupStart, KeyGroupEnd: f.KeyGroupEnd}, old, oldBatches, mem, arrowfmt.CompressZstd)
				for _, b := range oldBatches {
					b.Release()
				}
				if err != nil {
					t.Fatal(err)
				}
				if nf.Narrowed {
					t.Fatalf("%s: the rewritten file narrows columns", name)
				}
				if err := e.bucket.Put(e.ctx, name, out); err != nil {
					t.Fatal(err)
				}
				files[i] = nf
				rewritten++
			}
		}
	}
	if rewritten == 0 || rows == 0 {
		t.Fatalf("the savepoint has %d window state files (%d rows): nothing to test", rewritten, rows)
	}
	raw, err = m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.bucket.Put(e.ctx, key, raw); err != nil {
		t.Fatal(err)
	}
	t.Logf("savepoint %s: %d window state files of %d rows rewritten with the kinds as strings", key, rewritten, rows)

	rid := e.submitSpec(eoSpec("second", 0), coordinator.SubmitOptions{FromSavepoint: key})
	if st := e.wait(rid, 30*time.Second); st.State != coordinator.JobFinished {
		t.Fatalf("restore from the old files: %s %s", st.State, st.Error)
	}
	gotW := append(slices.Clone(firstW), e.lines("second/windows/")...)
	gotS := append(slices.Clone(firstS), e.lines("second/seq/")...)
	slices.Sort(gotW)
	slices.Sort(gotS)
	e.checkExact("old window state", gotW, gotS, wantW, wantS)
}

// withKindNames returns schema and batches (which it releases) with the
// int8 kind column as the names its metadata ("weir.codes": "0=replace,
// 1=window,2=clear") gives the codes.
func withKindNames(t *testing.T, schema *arrow.Schema, batches []arrow.RecordBatch) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	k := slices.IndexFunc(schema.Fields(), func(f arrow.Field) bool { return f.Name == "kind" })
	if k < 0 || schema.Field(k).Type.ID() != arrow.INT8 {
		t.Fatalf("window state schema without an int8 kind column: %s", schema)
	}
	codes, _ := schema.Field(k).Metadata.GetValue("weir.codes")
	names := map[int8]string{}
	for _, c := range strings.Split(codes, ",") {
		n, name, ok := strings.Cut(c, "=")
		code, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("kind column's codes %q", codes)
		}
		names[int8(code)] = name
	}
	fields := slices.Clone(schema.Fields())
	fields[k] = arrow.Field{Name: "kind", Type: arrow.BinaryTypes.String}
	old := arrow.NewSchema(fields, nil)
	var out []arrow.RecordBatch
	for _, b := range batches {
		kinds := b.Column(k).(*array.Int8)
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for r := range kinds.Len() {
			name, ok := names[kinds.Value(r)]
			if !ok {
				t.Fatalf("kind %d is not among %q", kinds.Value(r), codes)
			}
			sb.Append(name)
		}
		col := sb.NewArray()
		cols := slices.Clone(b.Columns())
		cols[k] = col
		out = append(out, array.NewRecordBatch(old, cols, b.NumRows()))
		col.Release()
		sb.Release()
		b.Release()
	}
	return old, out
}
