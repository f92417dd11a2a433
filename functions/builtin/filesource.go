package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
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
// area (_staging/) is never read as input. The objects are listed once at
// Open and sorted by key; object k is read by subtask k % parallelism.
type fileSource struct {
	node string
	path string
	out  Stream

	bucket blob.BucketReader
	dead   func(raw []byte, origin, reason string)
	dec    *arrowfmt.JSONDecoder
	// ctx bounds the object reads; it lives from Open to Close because an
	// object stays open across Polls.
	ctx    context.Context
	cancel context.CancelFunc

	objects []string // this subtask's objects, sorted
	obj     int      // index in objects of the one being (or next to be) read
	body    io.ReadCloser
	r       *bufio.Reader
	long    []byte // a line longer than the bufio buffer
	maxLine int    // MaxLineBytes; smaller in tests
	lineNo  int64  // lines consumed in the current object
	offset  int64  // bytes consumed in the current object
}

var _ task.Source = (*fileSource)(nil)

func newFileSource(src *spec.Source, out Stream) *fileSource {
	return &fileSource{node: src.Name, path: src.Path, out: out, maxLine: MaxLineBytes}
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
	var all []string
	for _, info := range infos {
		if inputObject(s.path, info.Key) {
			all = append(all, info.Key)
		}
	}
	if len(all) == 0 && ctx.Subtask == 0 && ctx.Logger != nil {
		ctx.Logger.Warn("files source has no input objects", "source", s.node, "path", s.path, "store", s.bucket.Describe())
	}
	for k, key := range all {
		if k%ctx.Parallelism == ctx.Subtask {
			s.objects = append(s.objects, key)
		}
	}
	s.dec = arrowfmt.NewJSONDecoder(s.out.Schema, allocator(ctx.Mem))
	return nil
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

// Position returns where the source is: the object being read (or read
// next) and the byte offset in it of the first line not yet returned.
// object is "" once every object has been read.
func (s *fileSource) Position() (object string, offset int64) {
	if s.obj >= len(s.objects) {
		return "", 0
	}
	return s.objects[s.obj], s.offset
}

// Poll reads lines until it has maxRows rows or the last object ends. A
// line that does not fit the schema goes to the dead-letter output with
// origin "<key>:<line>"; empty lines are skipped.
func (s *fileSource) Poll(ctx context.Context, maxRows int, _ time.Duration) (arrow.RecordBatch, error) {
	if maxRows < 1 {
		return nil, fmt.Errorf("poll files source: maxRows %d is not positive", maxRows)
	}
	for s.dec.Len() < maxRows {
		if s.body == nil {
			if s.obj >= len(s.objects) {
				break
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("poll files source: %w", err)
			}
			if err := s.openObject(); err != nil {
				return nil, err
			}
		}
		line, size, tooLong, err := s.readLine()
		if errors.Is(err, io.EOF) && len(line) == 0 {
			if err := s.closeObject(); err != nil {
				return nil, err
			}
			s.obj++
			s.lineNo, s.offset = 0, 0
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s in %s: %w", s.objects[s.obj], s.bucket.Describe(), err)
		}
		s.lineNo++
		s.offset += size
		if tooLong {
			s.deadLetter(line[:min(len(line), 1024)], fmt.Sprintf("line of %d bytes is longer than the limit of %d bytes (the dead letter holds its start)", size, s.maxLine))
			continue
		}
		if s.lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("poll files source: %w", err)
			}
		}
		record := bytes.TrimSpace(line)
		if len(record) == 0 {
			continue
		}
		if err := s.dec.Append(record); err != nil {
			s.deadLetter(record, recordReason(err))
		}
	}
	if s.dec.Len() == 0 {
		return nil, io.EOF
	}
	return s.dec.NewBatch(), nil
}

func (s *fileSource) deadLetter(raw []byte, reason string) {
	if s.dead != nil {
		s.dead(bytes.Clone(raw), fmt.Sprintf("%s:%d", s.objects[s.obj], s.lineNo), reason)
	}
}

// recordReason turns a decoding error into a dead letter's reason.
func recordReason(err error) string {
	return strings.TrimPrefix(err.Error(), "arrowfmt: ")
}

func (s *fileSource) openObject() error {
	key := s.objects[s.obj]
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
		return fmt.Errorf("close %s in %s: %w", s.objects[s.obj], s.bucket.Describe(), err)
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
