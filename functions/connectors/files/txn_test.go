package files

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// txnBackends returns the stores the files sink's transactions are tested
// on: a directory, and S3 on a MinIO started once for the test.
func txnBackends(t *testing.T) map[string]func(t *testing.T) blob.Bucket {
	t.Helper()
	var (
		once sync.Once
		m    *testenv.MinIO
	)
	parent := t
	return map[string]func(t *testing.T) blob.Bucket{
		"dir": connBucket,
		"minio": func(t *testing.T) blob.Bucket {
			t.Helper()
			once.Do(func() { m = testenv.StartMinIO(parent) })
			b, err := blob.NewS3(context.Background(), m.S3Config())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
	}
}

// txnFiles is one files sink under test with its store and its input.
type txnFiles struct {
	t      *testing.T
	b      blob.Bucket
	path   string
	format string
	in     stream.Stream
	mem    memory.Allocator
	clock  *connClock
}

// open opens a sink on the store, as another process would with only the
// spec.
func (f *txnFiles) open() (*fileSink, *task.Counters) {
	f.t.Helper()
	return connOpenFileSink(f.t, &spec.Sink{Name: "out", Type: spec.SinkFiles, Path: f.path, Format: f.format}, f.in, f.b, f.mem, f.clock)
}

// openTxn opens a transactional sink that rolls an object every 1000 rows
// (Parquet) or every ~100 kB (JSON lines).
func (f *txnFiles) openTxn() (*fileSink, *task.Counters) {
	f.t.Helper()
	s, c := f.open()
	s.EnableTransactions()
	s.maxRows, s.maxBytes = 1000, 100_000
	return s, c
}

// write writes recs, an hour apart: the clock must not roll anything.
func (f *txnFiles) write(s *fileSink, recs []arrow.RecordBatch) {
	f.t.Helper()
	for _, rec := range recs {
		f.clock.t = f.clock.t.Add(time.Hour)
		if err := s.Write(context.Background(), rec); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *txnFiles) keys(prefix string) []string {
	f.t.Helper()
	infos, err := f.b.List(context.Background(), prefix)
	if err != nil {
		f.t.Fatal(err)
	}
	var keys []string
	for _, info := range infos {
		keys = append(keys, info.Key)
	}
	return keys
}

// visible returns the objects a files source reading the path would read.
func (f *txnFiles) visible() []string {
	f.t.Helper()
	var keys []string
	for _, k := range f.keys(f.path + "/") {
		if inputObject(f.path, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func (f *txnFiles) staged() []string { f.t.Helper(); return f.keys(layout.StagingPrefix(f.path)) }

// rows reads the visible objects, in key order.
func (f *txnFiles) rows() [][]any {
	f.t.Helper()
	var rows [][]any
	for _, k := range f.visible() {
		data, err := f.b.Get(context.Background(), k)
		if err != nil {
			f.t.Fatal(err)
		}
		if f.format == spec.FormatParq {
			rows = append(rows, connReadParquet(f.t, data, f.in.Schema, f.mem)...)
		} else {
			rows = append(rows, connectortest.ReadJSONL(f.t, data, f.in.Schema, f.mem)...)
		}
	}
	return rows
}

func txnHandleOf(t *testing.T, raw json.RawMessage) fileTxnHandle {
	t.Helper()
	var h fileTxnHandle
	if err := connector.DecodeHandle("files", raw, &h, &h.V); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestFileSinkTxn(t *testing.T) {
	connectortest.CheckLeaks(t)
	ctx := context.Background()
	for backend, newBucket := range txnBackends(t) {
		t.Run(backend, func(t *testing.T) {
			for _, format := range []string{spec.FormatJSONL, spec.FormatParq} {
				setup := func(t *testing.T, name string, count int64) (*txnFiles, []arrow.RecordBatch, [][]any) {
					mem := connectortest.Mem(t)
					recs, in, want := connectortest.GenBatches(t, mem, count, 500)
					f := &txnFiles{t: t, b: newBucket(t), path: fmt.Sprintf("out/%s/%s", format, name), format: format, in: in, mem: mem,
						clock: &connClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
					return f, recs, want
				}

				t.Run(format+"/Commit", func(t *testing.T) {
					f, recs, want := setup(t, "commit", 5000)
					s, counters := f.openTxn()
					f.write(s, recs[:6])
					if err := s.Finish(ctx); err != nil {
						t.Fatal(err)
					}
					if keys := f.keys(f.path + "/"); len(keys) != 0 {
						t.Fatalf("objects before PreCommit: %v", keys)
					}
					raw, err := s.PreCommit(ctx, "job-a2-s1-c1")
					if err != nil {
						t.Fatal(err)
					}
					h := txnHandleOf(t, raw)
					staged := f.staged()
					if len(h.Objects) < 2 || len(staged) != len(h.Objects) {
						t.Fatalf("handle %s; staged %v: want the same objects, at least 2", raw, staged)
					}
					for _, o := range h.Objects {
						if !strings.HasPrefix(o.Staged, f.path+"/_staging/job-a2-s1-c1/part-1-a2-") {
							t.Errorf("staged key %s", o.Staged)
						}
					}
					if v := f.visible(); len(v) != 0 {
						t.Fatalf("visible after PreCommit: %v", v)
					}
					if n := counters.SinkRows.Load(); n != 3000 {
						t.Errorf("SinkRows %d after PreCommit, want 3000", n)
					}
					if err := s.Commit(ctx, raw); err != nil {
						t.Fatal(err)
					}
					connectortest.SameRows(t, f.rows(), want[:3000])
					if st := f.staged(); len(st) != 0 {
						t.Fatalf("staged after Commit: %v", st)
					}
					if err := s.Commit(ctx, raw); err != nil {
						t.Fatalf("second Commit: %v", err)
					}
					connectortest.SameRows(t, f.rows(), want[:3000])

					// The next transaction carries on the numbering; a
					// sink opened elsewhere with only the spec commits it.
					f.write(s, recs[6:])
					raw2, err := s.PreCommit(ctx, "job-a2-s1-c2")
					if err != nil {
						t.Fatal(err)
					}
					other, _ := f.open()
					if err := other.Commit(ctx, raw2); err != nil {
						t.Fatal(err)
					}
					connectortest.SameRows(t, f.rows(), want)
					if st := f.staged(); len(st) != 0 {
						t.Fatalf("staged after Commit: %v", st)
					}
					if n := counters.SinkRows.Load(); n != int64(len(want)) {
						t.Errorf("SinkRows %d, want %d", n, len(want))
					}
					// An empty transaction has an empty handle.
					raw3, err := s.PreCommit(ctx, "job-a2-s1-c3")
					if err != nil {
						t.Fatal(err)
					}
					if h := txnHandleOf(t, raw3); len(h.Objects) != 0 {
						t.Fatalf("empty transaction: %s", raw3)
					}
					if err := s.Commit(ctx, raw3); err != nil {
						t.Fatal(err)
					}
					connectortest.SameRows(t, f.rows(), want)
				})

				t.Run(format+"/SealThenStage", func(t *testing.T) {
					f, recs, want := setup(t, "seal", 3000)
					s, counters := f.openTxn()
					f.write(s, recs[:3])
					stage, err := s.Seal("job-a1-s0-c1")
					if err != nil {
						t.Fatal(err)
					}
					// The sink goes on writing while the sealed part stages.
					f.write(s, recs[3:])
					if len(f.staged()) != 0 {
						t.Fatal("Seal wrote to the store")
					}
					h1, err := stage(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if got := counters.SinkRows.Load(); got != 1500 {
						t.Errorf("rows counted after staging the first transaction: %d, want 1500", got)
					}
					h2, err := s.PreCommit(ctx, "job-a1-s0-c2")
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Commit(ctx, h1); err != nil {
						t.Fatal(err)
					}
					connectortest.SameRows(t, f.rows(), want[:1500])
					if err := s.Commit(ctx, h2); err != nil {
						t.Fatal(err)
					}
					connectortest.SameRows(t, f.rows(), want)
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				})

				t.Run(format+"/CommitAfterCrash", func(t *testing.T) {
					f, recs, want := setup(t, "crash", 4000)
					s, _ := f.openTxn()
					f.write(s, recs)
					raw, err := s.PreCommit(ctx, "job-a2-s1-c1")
					if err != nil {
						t.Fatal(err)
					}
					h := txnHandleOf(t, raw)
					if len(h.Objects) < 3 {
						t.Fatalf("want at least 3 objects: %s", raw)
					}
					// The first Commit dies after committing object 0
					// and copying object 1, before deleting its staged copy.
					if err := commitStaged(ctx, f.b, h.Objects[0]); err != nil {
						t.Fatal(err)
					}
					if err := copyStaged(ctx, f.b, h.Objects[1]); err != nil {
						t.Fatal(err)
					}
					if v := f.visible(); len(v) != 2 {
						t.Fatalf("visible after the crash: %v", v)
					}
					if err := s.Commit(ctx, raw); err != nil {
						t.Fatal(err)
					}
					connectortest.SameRows(t, f.rows(), want)
					if st := f.staged(); len(st) != 0 {
						t.Fatalf("staged after Commit: %v", st)
					}
					if v := f.visible(); len(v) != len(h.Objects) {
						t.Fatalf("visible %v, want %d objects", v, len(h.Objects))
					}
				})

				t.Run(format+"/ConcurrentCommit", func(t *testing.T) {
					f, recs, want := setup(t, "concurrent", 4000)
					s, _ := f.openTxn()
					f.write(s, recs)
					raw, err := s.PreCommit(ctx, "job-a2-s1-c1")
					if err != nil {
						t.Fatal(err)
					}
					a, _ := f.open()
					b, _ := f.open()
					var wg sync.WaitGroup
					errs := make([]error, 2)
					for i, snk := range []*fileSink{a, b} {
						wg.Go(func() { errs[i] = snk.Commit(ctx, raw) })
					}
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							t.Error(err)
						}
					}
					connectortest.SameRows(t, f.rows(), want)
					if st := f.staged(); len(st) != 0 {
						t.Fatalf("staged after Commit: %v", st)
					}
				})

				t.Run(format+"/Abort", func(t *testing.T) {
					f, recs, _ := setup(t, "abort", 2000)
					s, _ := f.openTxn()
					f.write(s, recs)
					raw, err := s.PreCommit(ctx, "job-a2-s1-c1")
					if err != nil {
						t.Fatal(err)
					}
					if st := f.staged(); len(st) == 0 {
						t.Fatal("nothing staged")
					}
					for range 2 {
						if err := s.Abort(ctx, raw); err != nil {
							t.Fatal(err)
						}
						if keys := f.keys(f.path + "/"); len(keys) != 0 {
							t.Fatalf("objects after Abort: %v", keys)
						}
					}
					// An aborted transaction cannot be committed: nothing
					// is left to commit, and Commit says so.
					if err := s.Commit(ctx, raw); err == nil || !strings.Contains(err.Error(), "both missing") {
						t.Fatalf("Commit after Abort: %v", err)
					}
				})
			}
		})
	}
}

func TestFileSinkTxnModes(t *testing.T) {
	connectortest.CheckLeaks(t)
	ctx := context.Background()
	mem := connectortest.Mem(t)
	recs, in, _ := connectortest.GenBatches(t, mem, 10, 10)
	b := connBucket(t)
	s, _ := connOpenFileSink(t, &spec.Sink{Name: "out", Type: spec.SinkFiles, Path: "out", Format: spec.FormatJSONL}, in, b, mem, &connClock{})
	if err := s.Write(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PreCommit(ctx, "c1"); err == nil || !strings.Contains(err.Error(), "EnableTransactions") {
		t.Errorf("PreCommit without transactions: %v", err)
	}
	s.EnableTransactions()
	for _, id := range []string{"", "a/b", "..", "_x", "a b", strings.Repeat("x", 201)} {
		if _, err := s.PreCommit(ctx, id); err == nil {
			t.Errorf("PreCommit(%q) accepted", id)
		}
	}
	for _, h := range []string{
		`{"v":2,"txn":"c1","objects":[]}`,
		`{"v":1,"txn":"c1","objects":[],"x":1}`,
		`{"v":1,"txn":"c1","objects":[]} {}`,
		`{"v":1,"txn":"c1","objects":[{"staged":"other/_staging/c1/part-0.jsonl","final":"other/part-0.jsonl"}]}`,
		`{"v":1,"txn":"c1","objects":[{"staged":"out/_staging/c1/part-0.jsonl","final":"out/part-1.jsonl"}]}`,
		`{"v":1,"txn":"c1","objects":[{"staged":"out/_staging/c2/part-0.jsonl","final":"out/part-0.jsonl"}]}`,
	} {
		if err := s.Commit(ctx, json.RawMessage(h)); err == nil {
			t.Errorf("Commit(%s) accepted", h)
		}
		if err := s.Abort(ctx, json.RawMessage(h)); err == nil {
			t.Errorf("Abort(%s) accepted", h)
		}
	}
}

func TestTxnCleanStaging(t *testing.T) {
	connectortest.CheckLeaks(t)
	ctx := context.Background()
	for backend, newBucket := range txnBackends(t) {
		t.Run(backend, func(t *testing.T) {
			mem := connectortest.Mem(t)
			recs, in, want := connectortest.GenBatches(t, mem, 3000, 500)
			f := &txnFiles{t: t, b: newBucket(t), path: "clean", format: spec.FormatJSONL, in: in, mem: mem, clock: &connClock{}}
			s, _ := f.openTxn()
			s.maxBytes = 1 // an object per Write
			handles := map[string]json.RawMessage{}
			for i, id := range []string{"job-a2-s1-c1", "job-a2-s1-c2", "job-a2-s1-c3"} {
				f.write(s, recs[2*i:2*i+2])
				raw, err := s.PreCommit(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				handles[id] = raw
			}
			// Another sink's staging area and committed output are not
			// touched.
			connPut(t, f.b, "clean2/_staging/job-a2-s1-c1/part-0-a0-000000.jsonl", "{}\n")
			connPut(t, f.b, "clean/part-0-a1-000000.jsonl", "")
			if n := len(f.staged()); n != 6 {
				t.Fatalf("%d staged objects, want 6", n)
			}
			removed, err := CleanStaging(ctx, f.b, "clean/", func(txn string) bool { return txn == "job-a2-s1-c2" })
			if err != nil || removed != 4 {
				t.Fatalf("CleanStaging: removed %d, %v; want 4", removed, err)
			}
			for _, k := range f.staged() {
				if !strings.HasPrefix(k, "clean/_staging/job-a2-s1-c2/") {
					t.Errorf("left %s", k)
				}
			}
			if _, err := f.b.Stat(ctx, "clean2/_staging/job-a2-s1-c1/part-0-a0-000000.jsonl"); err != nil {
				t.Errorf("other sink's staging: %v", err)
			}
			if err := s.Commit(ctx, handles["job-a2-s1-c2"]); err != nil {
				t.Fatal(err)
			}
			if err := f.b.Delete(ctx, "clean/part-0-a1-000000.jsonl"); err != nil {
				t.Fatal(err)
			}
			connectortest.SameRows(t, f.rows(), want[1000:2000])
			if removed, err := CleanStaging(ctx, f.b, "clean", func(string) bool { return false }); err != nil || removed != 0 {
				t.Fatalf("CleanStaging of a clean path: removed %d, %v", removed, err)
			}
		})
	}
}
