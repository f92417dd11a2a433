package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

func connBucket(t *testing.T) blob.Bucket {
	t.Helper()
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func connPut(t *testing.T, b blob.Bucket, key, data string) {
	t.Helper()
	if err := b.Put(context.Background(), key, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func connFilesSpec(path string) *spec.Source {
	return &spec.Source{Name: "trips", Type: spec.SourceFiles, Path: path, Format: spec.FormatJSONL,
		Schema: connectortest.Schema("id", "int64", "fare", "float64", "at", "timestamp_ms"),
		Event:  &spec.EventTime{Column: "at"}}
}

// connRunFiles reads src at parallelism p over bucket and returns the rows of
// every subtask and the dead letters.
func connRunFiles(t *testing.T, src *spec.Source, bucket blob.BucketReader, mem memory.Allocator, p, maxRows int) ([][][]any, []connectortest.DeadLetter) {
	t.Helper()
	out := connectortest.SourceSchema(t, src)
	dl := &connectortest.DeadLetters{}
	per := make([][][]any, p)
	for s := range p {
		fs, err := NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		ctx := connectortest.SourceContext(mem, s, p)
		ctx.Bucket, ctx.DeadLetter = bucket, dl.Add
		if err := fs.Open(ctx); err != nil {
			t.Fatal(err)
		}
		per[s] = connectortest.Drain(t, fs, maxRows)
		if err := fs.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fs.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	return per, dl.Got
}

func TestFileSourceGoodAndMalformed(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	connPut(t, b, "in/a.jsonl", `{"id":1,"fare":2.5,"at":1000}
{"id":2,"fare":"cheap","at":2000}

{"id":3,"at":"2026-01-01T00:00:00Z"}
not json at all
`)
	connPut(t, b, "in/b.jsonl", "{\"id\":4,\"fare\":1e2,\"at\":4000}\r\n{\"id\":5.5,\"fare\":1,\"at\":5000}\r\n{\"id\":6,\"fare\":null,\"at\":6000,\"extra\":[1,2]}")
	connPut(t, b, "in/sub/c.jsonl", `{"id":7,"fare":7,"at":7000}`+"\n")
	connPut(t, b, "in/_staging/x.jsonl", `{"id":100}`+"\n") // staging: skipped
	connPut(t, b, "in/.hidden.jsonl", `{"id":101}`+"\n")    // hidden: skipped
	connPut(t, b, "in-other/z.jsonl", `{"id":102}`+"\n")    // a sibling, not under in/
	connPut(t, b, "in/empty.jsonl", "")

	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	want := map[int64][]any{
		1: {int64(1), 2.5, at(1000)},
		3: {int64(3), nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		4: {int64(4), 100.0, at(4000)},
		6: {int64(6), nil, at(6000)},
		7: {int64(7), 7.0, at(7000)},
	}
	wantDead := []connectortest.DeadLetter{
		{Raw: `{"id":2,"fare":"cheap","at":2000}`, Origin: "in/a.jsonl:2", Reason: `field "fare": invalid value "cheap": want float64, got string`},
		{Raw: `not json at all`, Origin: "in/a.jsonl:5", Reason: "invalid JSON"},
		{Raw: `{"id":5.5,"fare":1,"at":5000}`, Origin: "in/b.jsonl:2", Reason: `field "id": invalid value 5.5: want int64, not an integral number`},
	}
	for _, path := range []string{"in", "in/"} {
		for _, p := range []int{1, 2, 3} {
			per, dead := connRunFiles(t, connFilesSpec(path), b, mem, p, 2)
			got := map[int64][]any{}
			for _, rows := range per {
				for _, r := range rows {
					id := r[0].(int64)
					if _, dup := got[id]; dup {
						t.Fatalf("path %q p=%d: id %d twice", path, p, id)
					}
					got[id] = r
				}
			}
			if len(got) != len(want) {
				t.Errorf("path %q p=%d: rows %v, want %v", path, p, got, want)
			}
			for id, w := range want {
				if !connectortest.SameRow(got[id], w) {
					t.Errorf("path %q p=%d: id %d: %v, want %v", path, p, id, got[id], w)
				}
			}
			slices.SortFunc(dead, func(a, b connectortest.DeadLetter) int { return strings.Compare(a.Origin, b.Origin) })
			if len(dead) != len(wantDead) {
				t.Fatalf("path %q p=%d: dead letters %q, want %q", path, p, dead, wantDead)
			}
			for i, w := range wantDead {
				d := dead[i]
				if d.Raw != w.Raw || d.Origin != w.Origin || !strings.Contains(d.Reason, w.Reason) {
					t.Errorf("path %q p=%d: dead letter %q, want %q with reason containing %q", path, p, d, w, w.Reason)
				}
			}
		}
	}
}

// TestFileSourceSplit checks that object k goes to subtask k % p and that
// every row is read exactly once, in order within an object.
func TestFileSourceSplit(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	const objects, perObject = 7, 50
	for k := range objects {
		var sb strings.Builder
		for i := range perObject {
			fmt.Fprintf(&sb, `{"id":%d,"fare":%d,"at":%d}`+"\n", k*1000+i, i, i)
		}
		connPut(t, b, fmt.Sprintf("in/part-%02d.jsonl", k), sb.String())
	}
	for _, p := range []int{1, 2, 3, 8} {
		per, dead := connRunFiles(t, connFilesSpec("in"), b, mem, p, 16)
		if len(dead) != 0 {
			t.Fatalf("dead letters %v", dead)
		}
		total := 0
		for s, rows := range per {
			var wantIDs []int64
			for k := s; k < objects; k += p {
				for i := range perObject {
					wantIDs = append(wantIDs, int64(k*1000+i))
				}
			}
			var ids []int64
			for _, r := range rows {
				ids = append(ids, r[0].(int64))
			}
			if !slices.Equal(ids, wantIDs) {
				t.Fatalf("p=%d subtask %d: ids %v, want %v", p, s, ids, wantIDs)
			}
			total += len(rows)
		}
		if total != objects*perObject {
			t.Fatalf("p=%d: %d rows, want %d", p, total, objects*perObject)
		}
	}
}

func TestFileSourcePosition(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	l1, l2 := `{"id":1}`+"\n", `{"id":2}`+"\r\n"
	connPut(t, b, "in/a", l1+"\n"+l2)
	connPut(t, b, "in/b", l1)
	src := connFilesSpec("in")
	fs, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	ctx := connectortest.SourceContext(mem, 0, 1)
	ctx.Bucket = b
	if err := fs.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	pos := func() string {
		p, err := fs.(*fileSource).Position()
		if err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	if got, want := pos(), `{"splits":{}}`; got != want {
		t.Errorf("before the first poll: %s, want %s", got, want)
	}
	a := len(l1) + 1 + len(l2)
	steps := []string{
		fmt.Sprintf(`{"splits":{"in/a":{"offset":%d}}}`, len(l1)),
		fmt.Sprintf(`{"splits":{"in/a":{"offset":%d}}}`, a),
		fmt.Sprintf(`{"splits":{"in/a":{"offset":%d,"done":true},"in/b":{"offset":%d}}}`, a, len(l1)),
	}
	for i, want := range steps {
		rec, err := fs.Poll(context.Background(), 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if got := pos(); got != want {
			t.Errorf("after poll %d: position %s, want %s", i, got, want)
		}
	}
	if _, err := fs.Poll(context.Background(), 1, 0); !errors.Is(err, io.EOF) {
		t.Fatalf("last poll: %v, want io.EOF", err)
	}
	if got, want := pos(), fmt.Sprintf(`{"splits":{"in/a":{"offset":%d,"done":true},"in/b":{"offset":%d,"done":true}}}`, a, len(l1)); got != want {
		t.Errorf("at the end: position %s, want %s", got, want)
	}
}

// TestFileSourceLongLines checks that a line over the limit becomes a dead
// letter and reading goes on, for lines shorter and longer than the read
// buffer.
func TestFileSourceLongLines(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	long := func(n int) string { return `{"id":9,"pad":"` + strings.Repeat("x", n) + `"}` }
	ok := `{"id":1}`
	for _, tc := range []struct {
		limit, pad int
	}{
		{100, 200},           // in the read buffer
		{100_000, 300_000},   // beyond it
		{100_000, 90_000},    // beyond the buffer, within the limit: a good row
		{1 << 20, 200 << 10}, // same
	} {
		connPut(t, b, "in/a", ok+"\n"+long(tc.pad)+"\n"+ok+"\n"+long(tc.pad))
		src := connFilesSpec("in")
		fs, err := NewSource(src, connectortest.SourceSchema(t, src))
		if err != nil {
			t.Fatal(err)
		}
		fs.(*fileSource).maxLine = tc.limit
		dl := &connectortest.DeadLetters{}
		ctx := connectortest.SourceContext(mem, 0, 1)
		ctx.Bucket, ctx.DeadLetter = b, dl.Add
		if err := fs.Open(ctx); err != nil {
			t.Fatal(err)
		}
		rows := connectortest.Drain(t, fs, 10)
		fs.Close()
		wantRows, wantDead := 4, 0
		if tc.pad+20 > tc.limit {
			wantRows, wantDead = 2, 2
		}
		if len(rows) != wantRows || len(dl.Got) != wantDead {
			t.Fatalf("limit %d, line of %d: %d rows and %d dead letters, want %d and %d", tc.limit, tc.pad, len(rows), len(dl.Got), wantRows, wantDead)
		}
		for i, d := range dl.Got {
			if want := fmt.Sprintf("in/a:%d", 2+2*i); d.Origin != want || !strings.Contains(d.Reason, "longer than the limit") || len(d.Raw) > 1024 {
				t.Errorf("dead letter %d: origin %s, reason %q, %d raw bytes", i, d.Origin, d.Reason, len(d.Raw))
			}
		}
	}
}

func TestFileSourceNoObjects(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	per, dead := connRunFiles(t, connFilesSpec("nothing/here"), b, mem, 2, 10)
	if len(per[0])+len(per[1])+len(dead) != 0 {
		t.Fatalf("rows %v, dead %v from an empty prefix", per, dead)
	}
	src := connFilesSpec("in")
	fs, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Open(connectortest.SourceContext(mem, 0, 1)); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("open without a bucket: %v", err)
	}
	fs.Close()
}

// TestFileSourceBacklog checks the backlog: the bytes of a subtask's
// objects not read yet, falling to 0 at the end.
func TestFileSourceBacklog(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	line := `{"id":1,"fare":2,"at":3}` + "\n" // 25 bytes
	for k := range 4 {
		connPut(t, b, fmt.Sprintf("in/part-%d.jsonl", k), strings.Repeat(line, 10))
	}
	src := connFilesSpec("in")
	fs, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	ctx := connectortest.SourceContext(mem, 1, 2) // parts 1 and 3
	ctx.Bucket = b
	if err := fs.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	backlog := func(want int64) {
		t.Helper()
		if n, unit, ok := fs.(task.Backlogged).Backlog(context.Background()); !ok || unit != "bytes" || n != want {
			t.Errorf("backlog %d %s (ok %v), want %d bytes", n, unit, ok, want)
		}
	}
	backlog(2 * 250)
	rec, err := fs.Poll(context.Background(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	backlog(2*250 - 4*25)
	connectortest.Drain(t, fs, 100)
	backlog(0)
}

// A files source reports the bytes of its objects read, up to all of them.
func TestFileSourceProgress(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	var all int64
	for k := range 3 {
		var sb strings.Builder
		for i := range 40 {
			fmt.Fprintf(&sb, `{"id":%d,"fare":%d,"at":%d}`+"\n", k*1000+i, i, i)
		}
		connPut(t, b, fmt.Sprintf("in/part-%02d.jsonl", k), sb.String())
		all += int64(sb.Len())
	}
	src := connFilesSpec("in")
	fs, err := NewSource(src, connectortest.SourceSchema(t, src))
	if err != nil {
		t.Fatal(err)
	}
	ctx := connectortest.SourceContext(mem, 0, 1)
	ctx.Bucket = b
	if err := fs.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	s := fs.(*fileSource)
	var last int64
	for {
		read, total, unit, ok := s.Progress()
		if !ok || unit != "bytes" || total != all || read < last || read > total {
			t.Fatalf("progress %d of %d %s (ok %v), last %d, want of %d bytes", read, total, unit, ok, last, all)
		}
		last = read
		rec, err := fs.Poll(context.Background(), 25, 0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if last != all {
		t.Errorf("drained: read %d of %d bytes", last, all)
	}
}
