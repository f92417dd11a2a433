package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/stream"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
)

// MaxLineBytes is the longest JSON line (with its newline) a source
// accepts; a longer line is sent to the dead-letter output, truncated, and
// reading goes on.
const MaxLineBytes = 16 << 20

// fileSource reads JSON lines from the objects under a path of the job's
// store.
//
// The path names one object or a "directory": the objects whose keys start
// with path + "/". Objects with a segment below the path that starts with
// '_' or '.' are skipped, like Hadoop and Spark do, so a sink's staging
// area (_staging/) is never read as input.
//
// Its objects are its splits (connector.SourceType.Splits), each named by
// its key. Each subtask lists them at Open, sorted by key, and subtask s of
// p reads the i-th when connector.OwnsSplit(i, s, p), one after another in
// key order. An object added later is read from the next restart on; one
// added while the subtasks open may be seen by some and not others, and
// then read twice or not at all in that attempt: add input before the job
// (re)starts. Its position is
//
//	{"splits": {"<key>": {"offset": n}, "<key>": {"offset": n, "done": true}, ...}}
//
// with the objects it owns that it has started: offset is the byte offset
// of the first line not yet read, and done marks an object read to its
// end. Done is recorded rather than taken from offset == size: an object's
// last line may lack its newline, so bytes appended to an object read to
// its end would continue a line already read, and a listed size may change.
// An owned object absent from a restored position starts at 0; the
// position may hold objects of other subtasks (after a rescale, or when the
// listing grew) or no longer listed, which are ignored. Resuming an object
// skips offset bytes: the store has no range reads, so they are read and
// discarded, counting lines so that dead-letter origins keep their line
// numbers. An offset must be a line start or the object's end; the first
// object to read is checked at Open, the others when reading reaches them.
//
// The position from before splits, {"object": key, "offset": n, "done":
// [key, ...]} (the subtask's objects read to the end, the one being or next
// to be read, "" once done holds them all, and the offset in it), restores
// at the parallelism it was taken at: Open checks that done is the start of
// this subtask's objects and object the one after it.
type fileSource struct {
	node string
	path string
	out  stream.Stream

	bucket blob.BucketReader
	dead   func(raw []byte, origin, reason string)
	dec    *arrowfmt.JSONDecoder
	// ctx bounds the object reads; it lives from Open to Close because an
	// object stays open across Polls.
	ctx    context.Context
	cancel context.CancelFunc

	listed  bool        // Open listed the objects
	splits  []fileSplit // this subtask's objects, sorted by key
	obj     int         // index in splits of the one being (or next to be) read
	total   int64       // the listed sizes of splits summed
	read    int64       // splits[i].read() summed
	body    io.ReadCloser
	r       *bufio.Reader
	long    []byte // a line longer than the bufio buffer
	maxLine int    // MaxLineBytes; smaller in tests
	lineNo  int64  // lines consumed in the current object

	restored map[string]splitPosition // from Restore, applied at Open
	legacy   *filePosition            // a restored position from before splits
}

// fileSplit is one object of the subtask and where it is in it.
type fileSplit struct {
	key  string
	size int64 // as listed at Open
	// offset is the bytes consumed; before the object is opened, those
	// of a restored position, to skip when it is.
	offset int64
	done   bool
}

// read is what the split counts as read for Progress: all of it once done
// (should the object have changed since it was listed), else its offset up
// to its listed size.
func (sp *fileSplit) read() int64 {
	if sp.done {
		return sp.size
	}
	return min(sp.offset, sp.size)
}

var (
	_ task.Resumable  = (*fileSource)(nil)
	_ task.Bounded    = (*fileSource)(nil)
	_ task.Backlogged = (*fileSource)(nil)
)

// filePosition is a files source's position, as JSON: Splits, or for a
// position from before splits Object, Offset and Done. The fields are
// pointers so that a missing one is seen.
type filePosition struct {
	Splits map[string]splitPosition `json:"splits"`
	Object *string                  `json:"object"`
	Offset *int64                   `json:"offset"`
	Done   *[]string                `json:"done"`
}

// splitPosition is the position of one object.
type splitPosition struct {
	Offset *int64 `json:"offset"`
	Done   bool   `json:"done,omitempty"`
}

// splitsExample is a position of splits, for errors.
const splitsExample = `{"splits": {"<key>": {"offset": 120}}} (with "done": true once read to the end)`

func newFileSource(node string, cfg SourceConfig, out stream.Stream) *fileSource {
	return &fileSource{node: node, path: cfg.Path, out: out, maxLine: MaxLineBytes}
}

func (s *fileSource) Open(ctx *task.SourceContext) error {
	if ctx.Bucket == nil {
		return fmt.Errorf("open files source %s: the job has no store to read %q from", s.node, s.path)
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return fmt.Errorf("open files source %s: subtask %d of parallelism %d", s.node, ctx.Subtask, ctx.Parallelism)
	}
	s.bucket, s.dead = ctx.Bucket, ctx.DeadLetter
	s.ctx, s.cancel = context.WithCancel(context.Background())
	infos, err := s.bucket.List(s.ctx, s.path)
	if err != nil {
		return fmt.Errorf("open files source %s: list %q: %w", s.node, s.path, err)
	}
	var all []blob.ObjectInfo
	for _, info := range infos {
		if inputObject(s.path, info.Key) {
			all = append(all, info)
		}
	}
	if len(all) == 0 && ctx.Subtask == 0 && ctx.Logger != nil {
		ctx.Logger.Warn("files source has no input objects", "source", s.node, "path", s.path, "store", s.bucket.Describe())
	}
	for i, info := range all {
		if connector.OwnsSplit(i, ctx.Subtask, ctx.Parallelism) {
			s.splits = append(s.splits, fileSplit{key: info.Key, size: info.Size})
		}
	}
	s.listed = true
	if s.legacy != nil {
		if err := s.fromLegacy(ctx); err != nil {
			return err
		}
	}
	for i := range s.splits {
		sp := &s.splits[i]
		if p, ok := s.restored[sp.key]; ok {
			sp.offset, sp.done = *p.Offset, p.Done
		}
		s.total += sp.size
		s.read += sp.read()
	}
	s.next()
	if s.obj < len(s.splits) && s.splits[s.obj].offset > 0 {
		if err := s.openSplit(); err != nil {
			return fmt.Errorf("open files source %s: %w", s.node, err)
		}
	}
	s.restored, s.legacy = nil, nil
	mem := ctx.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	s.dec = arrowfmt.NewJSONDecoder(s.out.Schema, mem)
	return nil
}

// next moves obj to the first object from it on not read to the end.
func (s *fileSource) next() {
	for s.obj < len(s.splits) && s.splits[s.obj].done {
		s.obj++
	}
}

// Backlog returns the bytes of this subtask's objects not read yet (as
// listed at Open: objects added later are not read either).
func (s *fileSource) Backlog(context.Context) (int64, string, bool) {
	read, total, _, ok := s.Progress()
	if !ok {
		return 0, "", false
	}
	return max(total-read, 0), "bytes", true
}

// fromLegacy checks a restored position from before splits against this
// subtask's objects (it was this subtask's position at this parallelism)
// and turns it into the splits it stands for.
func (s *fileSource) fromLegacy(ctx *task.SourceContext) error {
	p := fmt.Sprintf("open files source %s: restored position", s.node)
	object, offset, done := *s.legacy.Object, *s.legacy.Offset, *s.legacy.Done
	mine := fmt.Sprintf("subtask %d of %d reads %d objects under %q", ctx.Subtask, ctx.Parallelism, len(s.splits), s.path)
	for i, key := range done {
		if i >= len(s.splits) || s.splits[i].key != key {
			want := "no more"
			if i < len(s.splits) {
				want = fmt.Sprintf("%q", s.splits[i].key)
			}
			return fmt.Errorf("%s.done[%d]: %q is not this subtask's object %d (%s; want %s): the input changed, or the position is another subtask's",
				p, i, key, i, mine, want)
		}
	}
	if n := len(done); object != "" && (n >= len(s.splits) || s.splits[n].key != object) {
		want := "none: every object is done"
		if n < len(s.splits) {
			want = fmt.Sprintf("%q", s.splits[n].key)
		}
		return fmt.Errorf("%s.object: %q is not the object after done (%s; want %s): the input changed, or the position is another subtask's",
			p, object, mine, want)
	}
	s.restored = map[string]splitPosition{}
	for i, key := range done {
		s.restored[key] = splitPosition{Offset: &s.splits[i].size, Done: true}
	}
	if object != "" {
		s.restored[object] = splitPosition{Offset: &offset}
	}
	return nil
}

// offsetField names the restored offset of key in errors.
func (s *fileSource) offsetField(key string) string {
	if s.legacy != nil {
		return "position.offset"
	}
	return fmt.Sprintf("position.splits[%q].offset", key)
}

// openSplit opens splits[obj] and, if it was started, skips the bytes read.
func (s *fileSource) openSplit() error {
	sp := &s.splits[s.obj]
	if err := s.openObject(); err != nil {
		return err
	}
	if sp.offset == 0 {
		return nil
	}
	if err := s.skip(sp.offset); err != nil {
		return errors.Join(fmt.Errorf("restored %s: %w", s.offsetField(sp.key), err), s.closeObject())
	}
	return nil
}

// skip reads and discards the first n bytes of the open object, counting
// its lines, and checks that n is a line start or the object's end.
func (s *fileSource) skip(n int64) error {
	key := s.splits[s.obj].key
	var last byte
	var got int64
	for got < n {
		buf, err := s.r.Peek(int(min(n-got, int64(s.r.Size()))))
		if len(buf) > 0 {
			s.lineNo += int64(bytes.Count(buf, []byte{'\n'}))
			got += int64(len(buf))
			last = buf[len(buf)-1]
			if _, err := s.r.Discard(len(buf)); err != nil {
				return fmt.Errorf("skip to %d in %s: %w", n, key, err)
			}
		}
		if errors.Is(err, io.EOF) && got < n {
			return fmt.Errorf("%d is past the end of %s (%d bytes): the object changed, or the position is another object's", n, key, got)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("skip to %d in %s in %s: %w", n, key, s.bucket.Describe(), err)
		}
	}
	if last == '\n' {
		return nil
	}
	if _, err := s.r.Peek(1); errors.Is(err, io.EOF) {
		return nil // the end of an object without a final newline
	} else if err != nil {
		return fmt.Errorf("skip to %d in %s in %s: %w", n, key, s.bucket.Describe(), err)
	}
	return fmt.Errorf("%d is inside line %d of %s, not at a line start: the object changed, or the position is another object's", n, s.lineNo+1, key)
}

// inputObject reports whether key is an input object of a files source
// reading path.
func inputObject(path, key string) bool {
	var rest string
	switch {
	case key == path:
		return true
	case strings.HasSuffix(path, "/") && strings.HasPrefix(key, path):
		rest = key[len(path):]
	case strings.HasPrefix(key, path+"/"):
		rest = key[len(path)+1:]
	default:
		return false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".") {
			return false
		}
	}
	return true
}

// Progress counts bytes: of this subtask's objects as listed at Open,
// those read so far (capped at each object's listed size, should it grow).
func (s *fileSource) Progress() (read, total int64, unit string, ok bool) {
	if !s.listed {
		return 0, 0, "", false
	}
	return min(s.read, s.total), s.total, "bytes", true
}

// positionOut is the position a files source writes (see fileSource).
type positionOut struct {
	Splits map[string]splitOut `json:"splits"`
}

type splitOut struct {
	Offset int64 `json:"offset"`
	Done   bool  `json:"done,omitempty"`
}

// Position returns where the source is (see fileSource): for each object
// of the subtask started or read to the end, the byte offset of the first
// line not yet read, and whether it is done.
func (s *fileSource) Position() (json.RawMessage, error) {
	if s.dec == nil {
		return nil, fmt.Errorf("position of files source %s: not open", s.node)
	}
	if n := s.dec.Len(); n > 0 {
		return nil, fmt.Errorf("position of files source %s: %d rows are read but not returned (a Poll failed)", s.node, n)
	}
	p := positionOut{Splits: map[string]splitOut{}}
	for _, sp := range s.splits {
		if sp.offset > 0 || sp.done {
			p.Splits[sp.key] = splitOut{Offset: sp.offset, Done: sp.done}
		}
	}
	return json.Marshal(p)
}

// Restore makes the source resume at pos (see fileSource). It checks the
// position's shape; Open checks it against the objects it lists.
func (s *fileSource) Restore(pos json.RawMessage) error {
	what := "files source " + s.node
	if s.dec != nil {
		return fmt.Errorf("restore %s: the source is already open", what)
	}
	var p filePosition
	if err := connector.DecodePosition(what, pos, &p); err != nil {
		return err
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("restore %s: position.%s: %s", what, field, fmt.Sprintf(format, args...))
	}
	legacy := p.Object != nil || p.Offset != nil || p.Done != nil
	switch {
	case p.Splits != nil && legacy:
		return bad("splits", "given with object, offset or done: want the splits alone, e.g. %s", splitsExample)
	case legacy:
		if err := checkLegacy(s.path, p, bad); err != nil {
			return err
		}
		s.legacy = &p
		return nil
	case p.Splits == nil:
		return bad("splits", "missing: want the position of each object started, e.g. %s", splitsExample)
	}
	for key, sp := range p.Splits {
		field := fmt.Sprintf("splits[%q]", key)
		switch {
		case !inputObject(s.path, key):
			return bad(field, "%q is not an input object under %q", key, s.path)
		case sp.Offset == nil:
			return bad(field+".offset", "missing: want the byte offset in the object of the next line, e.g. %s", splitsExample)
		case *sp.Offset < 0:
			return bad(field+".offset", "%d is negative: want a byte offset >= 0", *sp.Offset)
		}
	}
	s.restored = p.Splits
	return nil
}

// checkLegacy checks the shape of a position from before splits.
func checkLegacy(path string, p filePosition, bad func(field, format string, args ...any) error) error {
	switch {
	case p.Object == nil:
		return bad("object", `missing: want the key being read, or "" when done holds every object`)
	case p.Offset == nil:
		return bad("offset", "missing: want the byte offset in object of the next line")
	case p.Done == nil:
		return bad("done", "missing: want the keys of the objects read to the end, [] for none")
	case *p.Offset < 0:
		return bad("offset", "%d is negative: want a byte offset >= 0", *p.Offset)
	case *p.Object == "" && *p.Offset != 0:
		return bad("offset", `%d with object "": want 0`, *p.Offset)
	case *p.Object != "" && !inputObject(path, *p.Object):
		return bad("object", "%q is not an input object under %q", *p.Object, path)
	}
	done := *p.Done
	for i, key := range done {
		field := fmt.Sprintf("done[%d]", i)
		switch {
		case !inputObject(path, key):
			return bad(field, "%q is not an input object under %q", key, path)
		case i > 0 && key <= done[i-1]:
			return bad(field, "%q does not sort after %q: objects are read in key order", key, done[i-1])
		}
	}
	if n := len(done); n > 0 && *p.Object != "" && *p.Object <= done[n-1] {
		return bad("object", "%q does not sort after the last done object %q: objects are read in key order", *p.Object, done[n-1])
	}
	return nil
}

// Poll reads lines until it has maxRows rows, the last object ends or ctx
// ends (then it returns the rows read so far, and the error if none). A
// line that does not fit the schema goes to the dead-letter output with
// origin "<key>:<line>"; empty lines are skipped.
func (s *fileSource) Poll(ctx context.Context, maxRows int, _ time.Duration) (arrow.RecordBatch, error) {
	if maxRows < 1 {
		return nil, fmt.Errorf("poll files source: maxRows %d is not positive", maxRows)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("poll files source: %w", err)
	}
	for read := 1; s.dec.Len() < maxRows; read++ {
		// A line read is past the position, so a context that ends
		// returns the rows read so far and the error comes with the next
		// Poll: the rows are neither dropped nor held by a failed Poll.
		if read%4096 == 0 && ctx.Err() != nil {
			break
		}
		if s.body == nil {
			if s.obj >= len(s.splits) {
				break
			}
			if ctx.Err() != nil {
				break
			}
			if err := s.openSplit(); err != nil {
				return nil, fmt.Errorf("read files source %s: %w", s.node, err)
			}
		}
		line, size, tooLong, err := s.readLine()
		if errors.Is(err, io.EOF) && len(line) == 0 {
			if err := s.closeObject(); err != nil {
				return nil, err
			}
			s.consumed(0, true)
			s.obj++
			s.next()
			s.lineNo = 0
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s in %s: %w", s.splits[s.obj].key, s.bucket.Describe(), err)
		}
		s.lineNo++
		s.consumed(size, false)
		if tooLong {
			s.deadLetter(line[:min(len(line), 1024)], fmt.Sprintf("line of %d bytes is longer than the limit of %d bytes (the dead letter holds its start)", size, s.maxLine))
			continue
		}
		record := bytes.TrimSpace(line)
		if len(record) == 0 {
			continue
		}
		if err := s.dec.Append(record); err != nil {
			s.deadLetter(record, connector.DeadLetterReason(err))
		}
	}
	if s.dec.Len() > 0 {
		return s.dec.NewBatch(), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("poll files source: %w", err)
	}
	return nil, io.EOF
}

// consumed records n more bytes read of the current object and, with done,
// that it is read to its end, keeping the bytes read in total.
func (s *fileSource) consumed(n int64, done bool) {
	sp := &s.splits[s.obj]
	before := sp.read()
	sp.offset += n
	sp.done = sp.done || done
	s.read += sp.read() - before
}

func (s *fileSource) deadLetter(raw []byte, reason string) {
	if s.dead != nil {
		s.dead(bytes.Clone(raw), fmt.Sprintf("%s:%d", s.splits[s.obj].key, s.lineNo), reason)
	}
}

func (s *fileSource) openObject() error {
	key := s.splits[s.obj].key
	body, err := s.bucket.Open(s.ctx, key)
	if err != nil {
		return fmt.Errorf("open %s in %s: %w", key, s.bucket.Describe(), err)
	}
	s.body = body
	if s.r == nil {
		s.r = bufio.NewReaderSize(body, 64<<10)
	} else {
		s.r.Reset(body)
	}
	return nil
}

func (s *fileSource) closeObject() error {
	if s.body == nil {
		return nil
	}
	err := s.body.Close()
	s.body = nil
	if err != nil {
		return fmt.Errorf("close %s in %s: %w", s.splits[s.obj].key, s.bucket.Describe(), err)
	}
	return nil
}

// readLine returns the next line including its "\n" (the last line of an
// object may lack it), how many bytes it took, and io.EOF after the last
// line. The line is valid until the next call. A line longer than
// MaxLineBytes is consumed whole, but only its first MaxLineBytes are
// returned, with tooLong set.
func (s *fileSource) readLine() (line []byte, size int64, tooLong bool, err error) {
	line, err = s.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > s.maxLine {
			return line[:s.maxLine], int64(len(line)), true, err
		}
		return line, int64(len(line)), false, err
	}
	if cap(s.long) > 1<<20 {
		s.long = nil // do not keep a huge buffer after one huge line
	}
	s.long = append(s.long[:0], line...)
	size = int64(len(line))
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = s.r.ReadSlice('\n')
		size += int64(len(line))
		if room := s.maxLine - len(s.long); room > 0 {
			s.long = append(s.long, line[:min(room, len(line))]...)
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil // the line is complete; the next call returns io.EOF
	}
	return s.long, size, size > int64(len(s.long)), err
}

func (s *fileSource) Close() error {
	var errs []error
	if s.body != nil {
		errs = append(errs, s.closeObject())
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.dec != nil {
		s.dec.Release()
		s.dec = nil
	}
	return errors.Join(errs...)
}
