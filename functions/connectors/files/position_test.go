package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// connPositionFiles puts objects with good, malformed, empty, CRLF, long
// and unterminated lines under in/.
func connPositionFiles(t *testing.T) blob.Bucket {
	t.Helper()
	b := connBucket(t)
	connPut(t, b, "in/a.jsonl", `{"id":1,"fare":1,"at":1000}
{"id":2,"fare":"cheap","at":2000}

{"id":3,"at":3000}
not json at all
{"id":4,"fare":4.5}
`+"{\"id\":5}\r\n")
	// A line longer than the 64 KiB read buffer, and no final newline.
	connPut(t, b, "in/b.jsonl", `{"id":10,"pad":"`+strings.Repeat("x", 100_000)+`"}`+"\n"+`{"id":11}
{"id":12.5}

{"id":13,"fare":13}`)
	var sb strings.Builder
	for i := 20; i < 40; i++ {
		if i == 30 {
			sb.WriteString(`{"id":"thirty"}` + "\n")
		}
		fmt.Fprintf(&sb, `{"id":%d,"at":%d}`+"\n", i, i*1000)
	}
	connPut(t, b, "in/sub/c.jsonl", sb.String())
	connPut(t, b, "in/d.jsonl", "")
	connPut(t, b, "in/e.jsonl", "\n\n{\"id\":50}\n")
	connPut(t, b, "in/_staging/x.jsonl", `{"id":100}`+"\n")
	return b
}

// TestFileSourcePositionRestore takes a position after every number of
// polls, at several batch sizes and parallelisms, reads on, and checks that
// a source restored at the position reads exactly the rest: rows and dead
// letters before the position plus those after the restore are those of one
// uninterrupted read, each once.
func TestFileSourcePositionRestore(t *testing.T) {
	connectortest.CheckLeaks(t)
	b := connPositionFiles(t)
	open := func(sub, p int, pos string) (task.Source, *connectortest.DeadLetters) {
		t.Helper()
		return splitsOpen(t, b, sub, p, pos)
	}
	midObject, afterDone := false, false
	for _, p := range []int{1, 2} {
		for sub := range p {
			for _, maxRows := range []int{1, 2, 5} {
				fs, dl := open(sub, p, "")
				want := connectortest.Drain(t, fs, maxRows)
				wantDead := dl.Got
				fs.Close()
				if len(want) == 0 || len(wantDead) == 0 {
					t.Fatalf("p=%d subtask %d: %d rows, %d dead letters: the test input is too small", p, sub, len(want), len(wantDead))
				}
				for cut := 0; ; cut++ {
					what := fmt.Sprintf("p=%d subtask %d maxRows %d, position after %d polls", p, sub, maxRows, cut)
					fs, dl := open(sub, p, "")
					before, ended := connectortest.PollN(t, fs, cut, maxRows)
					pos := connectortest.Position(t, fs)
					deadBefore := len(dl.Got)
					rest := connectortest.Drain(t, fs, maxRows)
					fs.Close()

					var fp struct {
						Splits map[string]struct {
							Offset int64
							Done   bool
						}
					}
					if err := json.Unmarshal([]byte(pos), &fp); err != nil {
						t.Fatal(err)
					}
					started, done := false, false
					for _, sp := range fp.Splits {
						started = started || (sp.Offset > 0 && !sp.Done)
						done = done || sp.Done
					}
					midObject = midObject || started
					afterDone = afterDone || (done && started)

					r, rdl := open(sub, p, pos)
					if got := connectortest.Position(t, r); got != pos {
						t.Errorf("%s: restored source's position %s, want %s", what, got, pos)
					}
					after := connectortest.Drain(t, r, maxRows)
					r.Close()
					connectortest.SameRowList(t, what+" "+pos+": rows after restore vs the rest of the first run", after, rest)
					connectortest.SameRowList(t, what+" "+pos+": rows before + rows after restore", append(before, after...), want)
					gotDead := append(dl.Got[:deadBefore:deadBefore], rdl.Got...)
					if fmt.Sprint(gotDead) != fmt.Sprint(wantDead) {
						t.Fatalf("%s %s: dead letters before + after restore:\n%q\nwant\n%q", what, pos, gotDead, wantDead)
					}
					if ended {
						break
					}
				}
			}
		}
	}
	if !midObject || !afterDone {
		t.Errorf("no position in the middle of an object (%v) or after a finished one (%v)", midObject, afterDone)
	}
}

func TestFileSourceRestoreRefused(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	connPut(t, b, "in/a", `{"id":1}`+"\n"+`{"id":2}`+"\n")
	connPut(t, b, "in/b", `{"id":3}`+"\n")
	connPut(t, b, "in/c", `{"id":4}`)
	src := connFilesSpec("in")
	out := connectortest.SourceSchema(t, src)
	fresh := func() task.Source {
		fs, err := NewSource(src, out)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	for _, tc := range []struct {
		pos  string
		want []string
	}{
		{``, []string{"position is empty"}},
		{`null`, []string{"position.splits: missing"}},
		{`{}`, []string{"position.splits: missing"}},
		{`{"splits":null}`, []string{"position.splits: missing"}},
		{`{"splits":{"in/a":{}}}`, []string{`position.splits["in/a"].offset: missing`}},
		{`{"splits":{"in/a":{"offset":-1}}}`, []string{`position.splits["in/a"].offset: -1 is negative`}},
		{`{"splits":{"in/a":{"offset":"1"}}}`, []string{"got string, want int64"}},
		{`{"splits":{"in/a":{"offset":1,"done":1}}}`, []string{"got number, want bool"}},
		{`{"splits":{"in/a":{"offset":1,"line":2}}}`, []string{`unknown field "line"`}},
		{`{"splits":{"other/a":{"offset":0}}}`, []string{`position.splits["other/a"]: "other/a" is not an input object under "in"`}},
		{`{"splits":{"in/_staging/a":{"offset":0}}}`, []string{`position.splits["in/_staging/a"]: "in/_staging/a" is not an input object`}},
		{`{"splits":{},"object":"in/a"}`, []string{"position.splits: given with object, offset or done"}},
		{`{"splits":[]}`, []string{"position.splits: got array"}},
		{`{"object":"in/a","done":[]}`, []string{"position.offset: missing"}},
		{`{"object":"in/a","offset":0}`, []string{"position.done: missing"}},
		{`{"object":"in/a","offset":-3,"done":[]}`, []string{"position.offset: -3 is negative"}},
		{`{"object":"in/a","offset":"12","done":[]}`, []string{"position.offset: got string, want int64"}},
		{`{"object":"in/a","offset":0,"done":"in/b"}`, []string{"position.done: got string"}},
		{`{"object":"","offset":5,"done":[]}`, []string{`position.offset: 5 with object ""`}},
		{`{"object":"other/a","offset":0,"done":[]}`, []string{`position.object: "other/a" is not an input object under "in"`}},
		{`{"object":"in/_staging/a","offset":0,"done":[]}`, []string{`position.object: "in/_staging/a" is not an input object`}},
		{`{"object":"in/c","offset":0,"done":["in/b","in/a"]}`, []string{`position.done[1]: "in/a" does not sort after "in/b"`}},
		{`{"object":"in/c","offset":0,"done":["in/a","in/a"]}`, []string{`position.done[1]`}},
		{`{"object":"in/a","offset":0,"done":["in/b"]}`, []string{`position.object: "in/a" does not sort after the last done object "in/b"`}},
		{`{"object":"in/a","offset":0,"done":[],"line":3}`, []string{`unknown field "line"`}},
		{`{"object":"in/a","offset":0,"done":[]}]`, []string{"more data after the position"}},
		{`[1,2]`, []string{"cannot unmarshal array"}},
	} {
		connectortest.RestoreRefused(t, fresh(), tc.pos, append(tc.want, "restore files source trips")...)
	}

	// Positions of the right shape that do not fit the objects are refused
	// by Open.
	for _, tc := range []struct {
		pos          string
		subtask, par int
		want         string
	}{
		{`{"object":"in/c","offset":0,"done":["in/b"]}`, 0, 2, `position.done[0]: "in/b" is not this subtask's object 0 (subtask 0 of 2 reads 2 objects under "in"; want "in/a")`},
		{`{"object":"in/c","offset":0,"done":[]}`, 0, 1, `position.object: "in/c" is not the object after done`},
		{`{"object":"in/d","offset":0,"done":["in/a","in/b","in/c"]}`, 0, 1, `position.object: "in/d" is not the object after done (subtask 0 of 1 reads 3 objects under "in"; want none`},
		{`{"object":"","offset":0,"done":["in/a","in/b","in/c","in/d"]}`, 0, 1, `position.done[3]: "in/d" is not this subtask's object 3`},
		{`{"object":"in/a","offset":100,"done":[]}`, 0, 1, "position.offset: 100 is past the end of in/a (18 bytes)"},
		{`{"object":"in/a","offset":3,"done":[]}`, 0, 1, "position.offset: 3 is inside line 1 of in/a"},
		{`{"object":"in/a","offset":12,"done":[]}`, 0, 1, "position.offset: 12 is inside line 2 of in/a"},
		{`{"splits":{"in/a":{"offset":100}}}`, 0, 1, `position.splits["in/a"].offset: 100 is past the end of in/a (18 bytes)`},
		{`{"splits":{"in/a":{"offset":3}}}`, 0, 1, `position.splits["in/a"].offset: 3 is inside line 1 of in/a`},
		{`{"splits":{"in/a":{"offset":18,"done":true},"in/b":{"offset":2}}}`, 0, 1, `position.splits["in/b"].offset: 2 is inside line 1 of in/b`},
	} {
		fs := fresh()
		if err := fs.(task.Resumable).Restore(json.RawMessage(tc.pos)); err != nil {
			t.Fatalf("Restore(%s): %v", tc.pos, err)
		}
		ctx := connectortest.SourceContext(mem, tc.subtask, tc.par)
		ctx.Bucket = b
		err := fs.Open(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "files source trips") {
			t.Errorf("Open subtask %d of %d after Restore(%s): %v, want an error containing %q", tc.subtask, tc.par, tc.pos, err, tc.want)
		}
		if err := fs.Close(); err != nil {
			t.Errorf("Close after a refused Open: %v", err)
		}
	}

	// Line starts and object ends are valid offsets, also of an object
	// without a final newline.
	for _, tc := range []struct {
		pos  string
		want []int64
	}{
		{`{"object":"in/a","offset":9,"done":[]}`, []int64{2, 3, 4}},
		{`{"object":"in/a","offset":18,"done":[]}`, []int64{3, 4}},
		{`{"object":"in/c","offset":8,"done":["in/a","in/b"]}`, nil},
		{`{"object":"","offset":0,"done":["in/a","in/b","in/c"]}`, nil},
		{`{"object":"","offset":0,"done":["in/a"]}`, []int64{3, 4}}, // objects listed after done are read
		{`{"splits":{}}`, []int64{1, 2, 3, 4}},
		{`{"splits":{"in/a":{"offset":9}}}`, []int64{2, 3, 4}},
		{`{"splits":{"in/a":{"offset":18,"done":true},"in/c":{"offset":8}}}`, []int64{3}},
		{`{"splits":{"in/a":{"offset":9,"done":true},"in/b":{"offset":9,"done":true}}}`, []int64{4}},                              // done, whatever the offset
		{`{"splits":{"in/b":{"offset":9,"done":true},"in/gone":{"offset":5},"in/z":{"offset":1,"done":true}}}`, []int64{1, 2, 4}}, // keys not listed are ignored
	} {
		fs := fresh()
		if err := fs.(task.Resumable).Restore(json.RawMessage(tc.pos)); err != nil {
			t.Fatalf("Restore(%s): %v", tc.pos, err)
		}
		ctx := connectortest.SourceContext(mem, 0, 1)
		ctx.Bucket = b
		if err := fs.Open(ctx); err != nil {
			t.Fatalf("Open after Restore(%s): %v", tc.pos, err)
		}
		var ids []int64
		for _, r := range connectortest.Drain(t, fs, 10) {
			ids = append(ids, r[0].(int64))
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Errorf("restored at %s: ids %v, want %v", tc.pos, ids, tc.want)
		}
		connectortest.RestoreRefused(t, fs, tc.pos, "already open")
		fs.Close()
	}
	if _, err := fresh().(task.Resumable).Position(); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("Position before Open: %v", err)
	}
}

// connCountdownCtx is a context whose Err turns to context.Canceled after
// n calls: it ends in the middle of a Poll, deterministically.
type connCountdownCtx struct {
	context.Context
	n int
}

func (c *connCountdownCtx) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// connFailingBucket's objects fail to read after failAfter bytes.
type connFailingBucket struct {
	blob.BucketReader
	failAfter int64
}

var errConnRead = errors.New("injected read error")

func (b connFailingBucket) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	body, err := b.BucketReader.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	r := io.MultiReader(io.LimitReader(body, b.failAfter), iotest.ErrReader(errConnRead))
	return struct {
		io.Reader
		io.Closer
	}{r, body}, nil
}

// TestFileSourcePositionAfterFailedPoll checks that a Poll whose context
// ends returns the rows it read and loses no line, and that the position is
// refused after a failed Poll left rows read but not returned.
func TestFileSourcePositionAfterFailedPoll(t *testing.T) {
	connectortest.CheckLeaks(t)
	mem := connectortest.Mem(t)
	b := connBucket(t)
	const lines = 10_000
	var sb strings.Builder
	for i := range lines {
		fmt.Fprintf(&sb, `{"id":%d}`+"\n", i)
	}
	connPut(t, b, "in/a", sb.String())
	src := connFilesSpec("in")
	open := func(bucket blob.BucketReader) task.Source {
		fs, err := NewSource(src, connectortest.SourceSchema(t, src))
		if err != nil {
			t.Fatal(err)
		}
		ctx := connectortest.SourceContext(mem, 0, 1)
		ctx.Bucket = bucket
		if err := fs.Open(ctx); err != nil {
			t.Fatal(err)
		}
		return fs
	}

	fs := open(b)
	defer fs.Close()
	ending := &connCountdownCtx{Context: context.Background(), n: 2}
	rec, err := fs.Poll(ending, lines, 0)
	if err != nil {
		t.Fatalf("poll whose context ends: %v, want the rows read so far", err)
	}
	rows := connectortest.RowsOf(rec)
	rec.Release()
	if len(rows) == 0 || len(rows) >= lines {
		t.Fatalf("poll whose context ends: %d rows, want some but not all", len(rows))
	}
	if _, err := fs.Poll(ending, lines, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("next poll: %v, want context.Canceled", err)
	}
	pos := connectortest.Position(t, fs)
	rows = append(rows, connectortest.Drain(t, fs, 3000)...)
	if len(rows) != lines {
		t.Fatalf("%d rows, want %d", len(rows), lines)
	}
	for i, r := range rows {
		if r[0] != int64(i) {
			t.Fatalf("row %d: %v", i, r)
		}
	}
	if !strings.Contains(pos, `"offset":`) || strings.Contains(pos, `"offset":0`) {
		t.Errorf("position after a poll whose context ended: %s", pos)
	}

	broken := open(connFailingBucket{b, 70_000})
	defer broken.Close()
	if rec, err := broken.Poll(context.Background(), lines, 0); !errors.Is(err, errConnRead) {
		if rec != nil {
			rec.Release()
		}
		t.Fatalf("poll of a failing object: %v, want the read error", err)
	}
	if _, err := broken.(task.Resumable).Position(); err == nil || !strings.Contains(err.Error(), "not returned") {
		t.Errorf("Position after a failed Poll holding rows: %v, want an error", err)
	}
}
