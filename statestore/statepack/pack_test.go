package statepack_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
	"github.com/weirstream/weir/statestore/statepack"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// stateFile encodes a state file of operator op with rows rows, as a task
// does before it writes it.
func stateFile(t *testing.T, op string, kg int, rows int) statepack.File {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int32Builder).Append(int32(kg))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	name := manifest.File{Key: layout.StateFileKey("j-1", op, kg, kg+1, 1, 0, manifest.KindBase), Kind: manifest.KindBase, Operator: op, KeyGroupStart: kg, KeyGroupEnd: kg + 1}
	f, data, err := statefile.Encode(name, schema, []arrow.RecordBatch{rec}, memory.DefaultAllocator, arrowfmt.CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	return statepack.File{Entry: f, Data: data}
}

func newGroup(t *testing.T, linger time.Duration) (*statepack.Group, blob.Bucket) {
	t.Helper()
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var written statepack.Stats // as Written reports it
	g := statepack.New(statepack.Config{Bucket: b, Job: "j-1", Attempt: 2, Worker: "w-1", Linger: linger,
		Written: func(files int) {
			mu.Lock()
			defer mu.Unlock()
			written.Objects++
			written.Files += files
		}})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if st := g.Stats(); written != st {
			t.Errorf("Written reported %+v, the group wrote %+v", written, st)
		}
	})
	return g, b
}

type result struct {
	entries []manifest.File
	err     error
}

// writeAll writes files[i] as member i's files of checkpoint, all at once.
func writeAll(ctx context.Context, members []*statepack.Member, checkpoint int64, files [][]statepack.File) []result {
	out := make([]result, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			e, err := m.Write(ctx, checkpoint, files[i])
			out[i] = result{e, err}
		})
	}
	wg.Wait()
	return out
}

// readBack reads every entry as a restore does and checks it is the file
// written.
func readBack(t *testing.T, b blob.Bucket, want []statepack.File, got []manifest.File) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries for %d files", len(got), len(want))
	}
	for i, e := range got {
		if !e.Packed || e.Size != want[i].Entry.Size || e.SHA256 != want[i].Entry.SHA256 || e.Operator != want[i].Entry.Operator || e.KeyGroupStart != want[i].Entry.KeyGroupStart {
			t.Fatalf("entry %d: %+v, want the file's %+v, packed", i, e, want[i].Entry)
		}
		data, err := statefile.Read(t.Context(), b, e)
		if err != nil {
			t.Fatalf("read %s: %v", e.Segment(), err)
		}
		if string(data) != string(want[i].Data) {
			t.Fatalf("read %s: not the bytes written", e.Segment())
		}
	}
}

func objects(t *testing.T, b blob.Bucket) []string {
	t.Helper()
	infos, err := b.List(t.Context(), layout.StatePrefix("j-1"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range infos {
		keys = append(keys, o.Key)
	}
	return keys
}

// Three tasks with two, one and no state files: one object, each task's
// files readable from it, at checkpoint after checkpoint.
func TestOneObjectPerCheckpoint(t *testing.T) {
	g, b := newGroup(t, time.Minute)
	members := []*statepack.Member{g.Join(), g.Join(), g.Join()}
	for ckpt := int64(1); ckpt <= 3; ckpt++ {
		files := [][]statepack.File{
			{stateFile(t, "window", 0, 10), stateFile(t, "join", 1, 5*int(ckpt))},
			{stateFile(t, "window", 64, 7)},
			nil,
		}
		res := writeAll(t.Context(), members, ckpt, files)
		var key string
		for i, r := range res {
			if r.err != nil {
				t.Fatalf("checkpoint %d, member %d: %v", ckpt, i, r.err)
			}
			readBack(t, b, files[i], r.entries)
			for _, e := range r.entries {
				if key == "" {
					key = e.Key
				} else if e.Key != key {
					t.Fatalf("checkpoint %d: files in %s and %s", ckpt, key, e.Key)
				}
			}
		}
		if want := layout.StateObjectKey("j-1", "w-1", ckpt, 2, int(ckpt)); key != want {
			t.Fatalf("checkpoint %d: object %s, want %s", ckpt, key, want)
		}
		if id, ok := layout.StateFileCheckpoint(key); !ok || id != ckpt {
			t.Fatalf("StateFileCheckpoint(%s) = %d, %v", key, id, ok)
		}
	}
	if got := objects(t, b); len(got) != 3 {
		t.Fatalf("objects: %q, want 3", got)
	}
	if st := g.Stats(); st != (statepack.Stats{Objects: 3, Files: 9}) {
		t.Fatalf("stats %+v", st)
	}
}

// A member that never reports its checkpoint holds the others for the
// linger, not longer; one that leaves, not at all.
func TestLingerAndLeave(t *testing.T) {
	g, b := newGroup(t, 300*time.Millisecond)
	a, slow := g.Join(), g.Join()
	f := stateFile(t, "window", 0, 3)
	start := time.Now()
	got, err := a.Write(t.Context(), 1, []statepack.File{f})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("wrote after %v, before the linger", waited)
	}
	readBack(t, b, []statepack.File{f}, got)

	// The slow member's files of checkpoint 1 come later, alone.
	f2 := stateFile(t, "window", 64, 4)
	got2, err := slow.Write(t.Context(), 1, []statepack.File{f2})
	if err != nil {
		t.Fatal(err)
	}
	readBack(t, b, []statepack.File{f2}, got2)
	if got[0].Key == got2[0].Key {
		t.Fatalf("both in %s", got[0].Key)
	}

	// Checkpoint 2: the writer waits for the slow member until it leaves.
	done := make(chan result)
	go func() {
		e, err := a.Write(t.Context(), 2, []statepack.File{f})
		done <- result{e, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("wrote before the other member reported or left: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	slow.Leave()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		readBack(t, b, []statepack.File{f}, r.entries)
	case <-time.After(200 * time.Millisecond):
		t.Fatal("still waiting after the other member left")
	}
	if _, err := slow.Write(t.Context(), 3, []statepack.File{f2}); err == nil {
		t.Fatal("a member that left wrote files")
	}
}

// A writer whose context ends takes its files back and writes nothing;
// the others' objects do not carry them.
func TestWriteCanceled(t *testing.T) {
	g, b := newGroup(t, time.Minute)
	a, other := g.Join(), g.Join()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := a.Write(ctx, 1, []statepack.File{stateFile(t, "window", 0, 3)})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	a.Leave()
	f := stateFile(t, "window", 64, 5)
	got, err := other.Write(t.Context(), 1, []statepack.File{f})
	if err != nil {
		t.Fatal(err)
	}
	readBack(t, b, []statepack.File{f}, got)
	info, err := b.Stat(t.Context(), got[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != f.Entry.Size {
		t.Fatalf("object of %d bytes for one file of %d", info.Size, f.Entry.Size)
	}
}

// failingBucket fails every Put.
type failingBucket struct{ blob.Bucket }

func (failingBucket) Put(context.Context, string, []byte) error { return errors.New("disk full") }

// A failed upload is every writer's error.
func TestUploadFails(t *testing.T) {
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := statepack.New(statepack.Config{Bucket: failingBucket{b}, Job: "j-1", Worker: "w"})
	members := []*statepack.Member{g.Join(), g.Join()}
	res := writeAll(t.Context(), members, 4, [][]statepack.File{{stateFile(t, "a", 0, 1)}, {stateFile(t, "b", 1, 1)}})
	for i, r := range res {
		if r.err == nil || r.entries != nil {
			t.Fatalf("member %d: %+v, want the upload's error", i, r)
		}
	}
}

// Many members, many checkpoints, in any order of arrival: every file is
// in exactly one object and reads back (run with -race).
func TestManyWriters(t *testing.T) {
	g, b := newGroup(t, time.Minute)
	const n, ckpts = 8, 20
	members := make([]*statepack.Member, n)
	for i := range members {
		members[i] = g.Join()
	}
	files := make([][]statepack.File, n)
	for i := range files {
		if i%3 != 2 { // every third member has nothing to write
			files[i] = []statepack.File{stateFile(t, fmt.Sprintf("op%d", i), i, i+1)}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n*ckpts)
	for i, m := range members {
		wg.Go(func() {
			for c := int64(1); c <= ckpts; c++ {
				if i == 0 && c%5 == 0 {
					continue // its barrier subsumed: it skips the checkpoint
				}
				got, err := m.Write(t.Context(), c, files[i])
				if err != nil {
					errs <- err
					return
				}
				if len(got) != len(files[i]) {
					errs <- fmt.Errorf("member %d, checkpoint %d: %d entries", i, c, len(got))
					return
				}
				for j, e := range got {
					data, err := statefile.Read(context.Background(), b, e)
					if err != nil || string(data) != string(files[i][j].Data) {
						errs <- fmt.Errorf("member %d, checkpoint %d: read %s: %v", i, c, e.Segment(), err)
						return
					}
				}
			}
			m.Leave()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := g.Stats(); st.Objects != ckpts {
		t.Fatalf("%d objects for %d checkpoints (%+v)", st.Objects, ckpts, st)
	}
}
