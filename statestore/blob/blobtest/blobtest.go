// Package blobtest is the contract suite for blob.Bucket: every
// implementation (the directory store, S3 on MinIO, prefixed views) runs the
// same tests, so they stay interchangeable.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/statestore/blob"
)

// TestBucket runs the contract suite. newBucket must return an empty bucket
// for each subtest; the suite closes it (Close must be safe to call twice,
// so newBucket may register its own Close as well).
func TestBucket(t *testing.T, newBucket func(t *testing.T) blob.Bucket) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, blob.Bucket)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"NotFound", testNotFound},
		{"List", testList},
		{"ListManyPages", testListManyPages},
		{"Delete", testDelete},
		{"Copy", testCopy},
		{"GetRange", testGetRange},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentConcurrent", testPutIfAbsentConcurrent},
		{"PutAtomic", testPutAtomic},
		{"Large", testLarge},
		{"PutReader", testPutReader},
		{"Empty", testEmpty},
		{"KeyNames", testKeyNames},
		{"InvalidKeys", testInvalidKeys},
		{"Canceled", testCanceled},
		{"DescribeAndClose", testDescribeAndClose},
		{"Requests", testRequests},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBucket(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("close %s: %v", b.Describe(), err)
				}
			})
			tc.fn(t, b)
		})
	}
}

func put(t *testing.T, b blob.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.Put(t.Context(), key, data); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func get(t *testing.T, b blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return data
}

func openAll(t *testing.T, b blob.Bucket, key string) []byte {
	t.Helper()
	rc, err := b.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %q: %v", key, err)
	}
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("close reader of %q: %v", key, err)
	}
	return data
}

func stat(t *testing.T, b blob.Bucket, key string) blob.ObjectInfo {
	t.Helper()
	info, err := b.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("stat %q: %v", key, err)
	}
	return info
}

func list(t *testing.T, b blob.Bucket, prefix string) []blob.ObjectInfo {
	t.Helper()
	infos, err := b.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return infos
}

func keys(infos []blob.ObjectInfo) []string {
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

// equal compares contents without dumping megabytes into the log.
func equal(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Fatalf("%s: got %d bytes, want %d; first difference at offset %d (got %q..., want %q...)",
		what, len(got), len(want), i, clip(got[i:]), clip(want[i:]))
}

func clip(b []byte) []byte { return b[:min(len(b), 16)] }

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

func testRoundTrip(t *testing.T, b blob.Bucket) {
	data := []byte("hello, weir")
	want := slices.Clone(data)
	before := time.Now()
	put(t, b, "obj", data)
	data[0] = 'X' // the bucket must not keep the caller's buffer

	equal(t, "get", get(t, b, "obj"), want)
	equal(t, "open", openAll(t, b, "obj"), want)
	info := stat(t, b, "obj")
	if info.Key != "obj" || info.Size != int64(len(want)) {
		t.Fatalf("stat: got %+v, want key %q size %d", info, "obj", len(want))
	}
	// Servers keep whole seconds and their clock may be a little off.
	if info.Modified.Before(before.Add(-5*time.Minute)) || info.Modified.After(time.Now().Add(5*time.Minute)) {
		t.Fatalf("stat: modified %v, want about %v", info.Modified, before)
	}

	put(t, b, "nested/deeper/obj.json", want)
	equal(t, "get nested", get(t, b, "nested/deeper/obj.json"), want)
}

// testCopy: a copy has the source's bytes, replaces what dst held, leaves
// the source as it was, works across prefixes and for keys that need
// escaping and for a large object; a missing source is ErrNotFound and
// creates nothing.
func testCopy(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "staged/_x/a b+c%.jsonl", []byte("the rows\n"))
	if err := b.Copy(ctx, "staged/_x/a b+c%.jsonl", "out/final ü.jsonl"); err != nil {
		t.Fatal(err)
	}
	equal(t, "copy", get(t, b, "out/final ü.jsonl"), []byte("the rows\n"))
	equal(t, "source after the copy", get(t, b, "staged/_x/a b+c%.jsonl"), []byte("the rows\n"))
	put(t, b, "other", []byte("an older object, longer than the copy"))
	if err := b.Copy(ctx, "staged/_x/a b+c%.jsonl", "other"); err != nil {
		t.Fatal(err)
	}
	equal(t, "copy over an object", get(t, b, "other"), []byte("the rows\n"))
	if info := stat(t, b, "other"); info.Size != int64(len("the rows\n")) {
		t.Fatalf("stat after copying over: size %d", info.Size)
	}
	big := randomBytes(7, 6<<20+3)
	put(t, b, "big", big)
	if err := b.Copy(ctx, "big", "big-copy"); err != nil {
		t.Fatal(err)
	}
	equal(t, "large copy", get(t, b, "big-copy"), big)
	wantErr(t, "copy of a missing object", b.Copy(ctx, "missing", "nowhere"), blob.ErrNotFound)
	_, err := b.Stat(ctx, "nowhere")
	wantErr(t, "what a failed copy left", err, blob.ErrNotFound)
	wantErr(t, "copy from an invalid key", b.Copy(ctx, "../x", "y"), blob.ErrInvalidKey)
	wantErr(t, "copy to an invalid key", b.Copy(ctx, "big", "a//b"), blob.ErrInvalidKey)
}

// testGetRange: a range is the object's bytes from the offset, cut where
// the object ends; a missing object is ErrNotFound, an invalid key or a
// negative offset or length an error.
func testGetRange(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	data := randomBytes(3, 1<<20+17)
	put(t, b, "packed/obj.arrow", data)
	n := int64(len(data))
	for _, c := range []struct{ off, n int64 }{
		{0, n}, {0, 1}, {5, 100}, {n - 1, 1}, {1 << 19, 1 << 19}, {n - 10, 100}, {n, 4}, {n + 100, 4}, {7, 0},
	} {
		got, err := b.GetRange(ctx, "packed/obj.arrow", c.off, c.n)
		if err != nil {
			t.Fatalf("get range [%d, +%d): %v", c.off, c.n, err)
		}
		lo, hi := min(c.off, n), min(c.off+c.n, n)
		equal(t, fmt.Sprintf("get range [%d, +%d)", c.off, c.n), got, data[lo:hi])
	}
	_, err := b.GetRange(ctx, "missing", 0, 10)
	wantErr(t, "get range of a missing object", err, blob.ErrNotFound)
	_, err = b.GetRange(ctx, "missing", 0, 0)
	wantErr(t, "empty range of a missing object", err, blob.ErrNotFound)
	_, err = b.GetRange(ctx, "a//b", 0, 10)
	wantErr(t, "get range of an invalid key", err, blob.ErrInvalidKey)
	if _, err := b.GetRange(ctx, "packed/obj.arrow", -1, 10); err == nil {
		t.Fatal("get range at offset -1: no error")
	}
}

func testOverwrite(t *testing.T, b blob.Bucket) {
	put(t, b, "k", []byte("first version, longer"))
	put(t, b, "k", []byte("second"))
	equal(t, "get", get(t, b, "k"), []byte("second"))
	if info := stat(t, b, "k"); info.Size != 6 {
		t.Fatalf("stat after overwrite: size %d, want 6", info.Size)
	}
	if got := keys(list(t, b, "")); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("list after overwrite: %q, want [k]", got)
	}
}

func testNotFound(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "file", []byte("x"))
	put(t, b, "dir/child", []byte("y"))
	// "file/child" has a file as parent and "dir" is only a prefix: in a
	// directory store both are special cases of a missing object.
	for _, key := range []string{"missing", "no/such/dir/key", "file/child", "dir"} {
		_, err := b.Get(ctx, key)
		wantErr(t, "get "+key, err, blob.ErrNotFound)
		_, err = b.Open(ctx, key)
		wantErr(t, "open "+key, err, blob.ErrNotFound)
		_, err = b.Stat(ctx, key)
		wantErr(t, "stat "+key, err, blob.ErrNotFound)
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("delete missing %q: %v", key, err)
		}
	}
	equal(t, "dir/child survives deleting the prefix dir", get(t, b, "dir/child"), []byte("y"))
}

func testList(t *testing.T, b blob.Bucket) {
	all := []string{"b", "a/1", "a/2", "a/sub/3", "a-b", "ab", "c/d/e"}
	for i, k := range all {
		put(t, b, k, []byte(strings.Repeat("x", i+1)))
	}
	size := func(k string) int64 { return int64(slices.Index(all, k) + 1) }

	infos := list(t, b, "")
	sorted := slices.Sorted(slices.Values(all))
	if got := keys(infos); !slices.Equal(got, sorted) {
		t.Fatalf("list all: %q, want %q", got, sorted)
	}
	for _, info := range infos {
		if info.Size != size(info.Key) || info.Modified.IsZero() {
			t.Fatalf("list all: %+v, want size %d and a modified time", info, size(info.Key))
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/1", "a/2", "a/sub/3"}},
		// '-' < '/' < 'b': key order, not directory-walk order.
		{"a", []string{"a-b", "a/1", "a/2", "a/sub/3", "ab"}},
		{"a/s", []string{"a/sub/3"}},
		{"a/sub/", []string{"a/sub/3"}},
		{"c/d/", []string{"c/d/e"}},
		{"c/d/e", []string{"c/d/e"}},
		{"c/", []string{"c/d/e"}},
		{"b", []string{"b"}},
		{"zzz", nil},
		{"nope/", nil},
		{"b/", nil},
	} {
		if got := keys(list(t, b, tc.prefix)); !slices.Equal(got, tc.want) {
			t.Errorf("list %q: %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// testListManyPages crosses S3's 1000-keys-per-page limit.
func testListManyPages(t *testing.T, b blob.Bucket) {
	const n = 1003
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("many/%04d", i))
	}
	parallel(t, 8, want, func(k string) error { return b.Put(t.Context(), k, []byte(k)) })
	put(t, b, "other", nil)
	if got := keys(list(t, b, "many/")); !slices.Equal(got, want) {
		t.Fatalf("list many/: got %d keys (first %q), want %d", len(got), got[:min(len(got), 3)], n)
	}
	if got := list(t, b, ""); len(got) != n+1 {
		t.Fatalf("list all: got %d keys, want %d", len(got), n+1)
	}
	// A list is billed per page of 1,000 keys.
	r := requests(t, b)
	before := r.Counts()
	list(t, b, "many/")
	list(t, b, "")
	list(t, b, "many/none")
	wantRequests(t, r, before, map[string]uint64{"list": 2 + 2 + 1})
}

func requests(t *testing.T, b blob.Bucket) *blob.Requests {
	t.Helper()
	r := blob.RequestsOf(b)
	if r == nil {
		t.Fatalf("%s counts no requests (blob.RequestsOf is nil)", b.Describe())
	}
	return r
}

// wantRequests checks that the counts grew from before by exactly want
// (ops not in want: by nothing).
func wantRequests(t *testing.T, r *blob.Requests, before, want map[string]uint64) {
	t.Helper()
	for op, n := range r.Counts() {
		if got := n - before[op]; got != want[op] {
			t.Errorf("%s requests: %d, want %d", op, got, want[op])
		}
	}
}

// parallel runs fn over items with the given number of workers and fails
// the test on the first error.
func parallel(t *testing.T, workers int, items []string, fn func(string) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan string)
	for range workers {
		wg.Go(func() {
			for it := range next {
				if err := fn(it); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", it, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func testDelete(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	put(t, b, "keep", []byte("k"))
	put(t, b, "x/y/z", []byte("z"))
	put(t, b, "x/w", []byte("w"))
	for range 2 { // idempotent
		if err := b.Delete(ctx, "x/y/z"); err != nil {
			t.Fatalf("delete x/y/z: %v", err)
		}
	}
	_, err := b.Get(ctx, "x/y/z")
	wantErr(t, "get after delete", err, blob.ErrNotFound)
	if got := keys(list(t, b, "")); !slices.Equal(got, []string{"keep", "x/w"}) {
		t.Fatalf("list after delete: %q, want [keep x/w]", got)
	}
	if err := b.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	if err := b.Delete(ctx, "x/w"); err != nil {
		t.Fatalf("delete x/w: %v", err)
	}
	if got := keys(list(t, b, "x/")); len(got) != 0 {
		t.Fatalf("list x/ after deleting everything in it: %q", got)
	}
	// The (now empty) parents can be used again.
	put(t, b, "x/y/z", []byte("again"))
	equal(t, "get after re-put", get(t, b, "x/y/z"), []byte("again"))
}

func testPutIfAbsent(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	if err := b.PutIfAbsent(ctx, "m", []byte("one")); err != nil {
		t.Fatalf("first put-if-absent: %v", err)
	}
	err := b.PutIfAbsent(ctx, "m", []byte("two"))
	wantErr(t, "second put-if-absent", err, blob.ErrExists)
	equal(t, "get after refused create", get(t, b, "m"), []byte("one"))

	put(t, b, "m", []byte("three")) // an unconditional Put still replaces
	equal(t, "get after put", get(t, b, "m"), []byte("three"))

	if err := b.Delete(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "m", []byte("four")); err != nil {
		t.Fatalf("put-if-absent after delete: %v", err)
	}
	equal(t, "get", get(t, b, "m"), []byte("four"))

	if err := b.PutIfAbsent(ctx, "jobs/j/checkpoints/1/manifest.json", []byte("{}")); err != nil {
		t.Fatalf("nested put-if-absent: %v", err)
	}
	equal(t, "nested get", get(t, b, "jobs/j/checkpoints/1/manifest.json"), []byte("{}"))
}

// testPutIfAbsentConcurrent is the checkpoint commit: many writers race to
// create one manifest and exactly one must win, with its own content.
func testPutIfAbsentConcurrent(t *testing.T, b blob.Bucket) {
	const writers = 16
	for round := range 3 {
		key := fmt.Sprintf("race/%d/manifest.json", round)
		payloads := make([][]byte, writers)
		for i := range payloads {
			payloads[i] = randomBytes(uint64(round*writers+i), 64<<10+i)
		}
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = b.PutIfAbsent(t.Context(), key, payloads[i])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both created %q", round, winner, i, key)
			case err == nil:
				winner = i
			case !errors.Is(err, blob.ErrExists):
				t.Fatalf("round %d: writer %d: %v, want nil or ErrExists", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %q", round, key)
		}
		equal(t, fmt.Sprintf("round %d: content of the winner %d", round, winner), get(t, b, key), payloads[winner])
	}
}

// testPutAtomic overwrites an object while reading it: every read must see
// one whole version.
func testPutAtomic(t *testing.T, b blob.Bucket) {
	versions := [][]byte{
		bytes.Repeat([]byte("a"), 1<<20),
		bytes.Repeat([]byte("b"), 3<<19),
	}
	put(t, b, "atomic", versions[0])
	done := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		defer close(done)
		for i := range 20 {
			if writeErr = b.Put(t.Context(), "atomic", versions[(i+1)%2]); writeErr != nil {
				return
			}
		}
	})
	reads := 0
	for stop := false; !stop; reads++ {
		select {
		case <-done:
			stop = true // one more read after the last write
		default:
		}
		var got []byte
		if reads%2 == 0 {
			got = get(t, b, "atomic")
		} else {
			got = openAll(t, b, "atomic")
		}
		if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
			wg.Wait()
			t.Fatalf("read %d: %d bytes that are neither version (%d or %d bytes)", reads, len(got), len(versions[0]), len(versions[1]))
		}
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
}

func testLarge(t *testing.T, b blob.Bucket) {
	const size = 8 << 20
	data := randomBytes(42, size)
	put(t, b, "large", data)
	equal(t, "get", get(t, b, "large"), data)
	if info := stat(t, b, "large"); info.Size != size {
		t.Fatalf("stat: size %d, want %d", info.Size, size)
	}
	rc, err := b.Open(t.Context(), "large")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != size || !bytes.Equal(h.Sum(nil), sha256Sum(data)) {
		t.Fatalf("open: streamed %d bytes (err %v), want %d with the same sha256", n, err, size)
	}
	if err := b.PutIfAbsent(t.Context(), "large-once", data); err != nil {
		t.Fatal(err)
	}
	equal(t, "get large-once", get(t, b, "large-once"), data)
}

// testPutReader puts objects from a reader that hands out odd pieces
// (not a bytes.Reader), the way an encoded state file is uploaded from
// its chunks: every bucket of weir streams it (blob.ReaderPutter), and a
// retried upload may seek back. A reader shorter or longer than the size
// given is an error, and leaves no object behind.
func testPutReader(t *testing.T, b blob.Bucket) {
	if _, ok := b.(blob.ReaderPutter); !ok {
		t.Fatalf("%s does not put from a reader (blob.ReaderPutter)", b.Describe())
	}
	ctx := t.Context()
	for _, size := range []int{0, 1, 100_000, 5<<20 + 3} {
		data := randomBytes(uint64(size), size)
		key := fmt.Sprintf("streamed/%d", size)
		r := &pieceReader{data: data}
		r.Seek(int64(size/2), io.SeekStart)
		r.Seek(0, io.SeekStart) // a reader at its start, however it got there
		if err := blob.PutReader(ctx, b, key, r, int64(size)); err != nil {
			t.Fatalf("put %d bytes from a reader: %v", size, err)
		}
		equal(t, "get "+key, get(t, b, key), data)
	}
	data := randomBytes(7, 1000)
	if err := blob.PutReader(ctx, b, "short", &pieceReader{data: data[:999]}, 1000); err == nil {
		t.Error("put from a reader one byte short of its size: no error")
	}
	if err := blob.PutReader(ctx, b, "long", &pieceReader{data: data}, 999); err == nil {
		t.Error("put from a reader one byte longer than its size: no error")
	}
	for _, key := range []string{"short", "long"} {
		if _, err := b.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("stat %s after a failed put: %v, want blob.ErrNotFound", key, err)
		}
	}
}

// pieceReader reads data in pieces of at most 4097 bytes and can seek.
type pieceReader struct {
	data []byte
	off  int64
}

func (r *pieceReader) Read(p []byte) (int, error) {
	if r.off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 4097)], r.data[r.off:])
	r.off += int64(n)
	return n, nil
}

func (r *pieceReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.off
	case io.SeekEnd:
		off += int64(len(r.data))
	}
	if off < 0 {
		return r.off, errors.New("seek before the start")
	}
	r.off = off
	return off, nil
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func testEmpty(t *testing.T, b blob.Bucket) {
	put(t, b, "empty", []byte{})
	if got := get(t, b, "empty"); len(got) != 0 {
		t.Fatalf("get: %d bytes, want 0", len(got))
	}
	if got := openAll(t, b, "empty"); len(got) != 0 {
		t.Fatalf("open: %d bytes, want 0", len(got))
	}
	if info := stat(t, b, "empty"); info.Size != 0 {
		t.Fatalf("stat: size %d, want 0", info.Size)
	}
	if err := b.PutIfAbsent(t.Context(), "empty-once", nil); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "second create of an empty object", b.PutIfAbsent(t.Context(), "empty-once", nil), blob.ErrExists)
	infos := list(t, b, "")
	if got := keys(infos); !slices.Equal(got, []string{"empty", "empty-once"}) || infos[0].Size != 0 {
		t.Fatalf("list: %+v, want empty and empty-once, size 0", infos)
	}
}

func testKeyNames(t *testing.T, b blob.Bucket) {
	names := []string{
		"with space/file name.txt",
		"unicode/日本語/ключ-🔑",
		"punct/a+b=c&d;e,f@g",
		"punct/percent%20literal",
		"punct/question?hash#",
		"punct/tilde~star*brackets[]()quote'\"",
		"dots/.hidden",
		"dots/a..b",
		"dots/...",
	}
	for _, k := range names {
		put(t, b, k, []byte(k))
	}
	for _, k := range names {
		equal(t, "get "+k, get(t, b, k), []byte(k))
		if info := stat(t, b, k); info.Key != k || info.Size != int64(len(k)) {
			t.Fatalf("stat %q: %+v", k, info)
		}
	}
	want := slices.Sorted(slices.Values(names))
	if got := keys(list(t, b, "")); !slices.Equal(got, want) {
		t.Fatalf("list: %q, want %q", got, want)
	}
	if got := keys(list(t, b, "unicode/日本")); !slices.Equal(got, []string{"unicode/日本語/ключ-🔑"}) {
		t.Fatalf("list unicode prefix: %q", got)
	}
}

func testInvalidKeys(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	bad := []string{
		"", "/abs", "../escape", "a/../../escape", "a//b", "a/", ".", "..",
		"a/./b", "nul\x00byte", ".weir-tmp-x", "a/.weir-tmp-1", "bad\xffutf8",
		strings.Repeat("k", 1025),
	}
	for _, k := range bad {
		checks := map[string]error{
			"put":           b.Put(ctx, k, []byte("x")),
			"put-if-absent": b.PutIfAbsent(ctx, k, []byte("x")),
			"delete":        b.Delete(ctx, k),
		}
		_, checks["get"] = b.Get(ctx, k)
		_, checks["open"] = b.Open(ctx, k)
		_, checks["stat"] = b.Stat(ctx, k)
		for op, err := range checks {
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("%s %q: got %v, want ErrInvalidKey", op, k, err)
			}
		}
	}
	for _, p := range []string{"/", "../", "a/../", "a//"} {
		if _, err := b.List(ctx, p); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("list %q: got %v, want ErrInvalidKey", p, err)
		}
	}
	if got := list(t, b, ""); len(got) != 0 {
		t.Fatalf("invalid keys left objects: %q", keys(got))
	}
}

func testCanceled(t *testing.T, b blob.Bucket) {
	put(t, b, "there", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	wantErr(t, "put", b.Put(ctx, "k", []byte("x")), context.Canceled)
	wantErr(t, "put-if-absent", b.PutIfAbsent(ctx, "k", []byte("x")), context.Canceled)
	_, err := b.Get(ctx, "there")
	wantErr(t, "get", err, context.Canceled)
	_, err = b.List(ctx, "")
	wantErr(t, "list", err, context.Canceled)
	_, err = b.Get(t.Context(), "k")
	wantErr(t, "get after canceled puts", err, blob.ErrNotFound)
}

func testDescribeAndClose(t *testing.T, b blob.Bucket) {
	if b.Describe() == "" {
		t.Fatal("describe: empty")
	}
	put(t, b, "k", []byte("x"))
	for i := range 2 {
		if err := b.Close(); err != nil {
			t.Fatalf("close #%d: %v", i+1, err)
		}
	}
}

// testRequests checks that a known sequence of calls counts exactly the
// requests S3 receives (and bills) for it, by kind.
func testRequests(t *testing.T, b blob.Bucket) {
	ctx := t.Context()
	r := requests(t, b)
	before := r.Counts()
	put(t, b, "a", []byte("1"))
	put(t, b, "p/c", []byte("2"))
	if err := b.PutIfAbsent(ctx, "d", []byte("3")); err != nil {
		t.Fatal(err)
	}
	// Taken: a PUT that gets 412, and a HEAD asking whether this call won.
	wantErr(t, "put-if-absent a", b.PutIfAbsent(ctx, "a", []byte("4")), blob.ErrExists)
	get(t, b, "a")
	_, err := b.Get(ctx, "missing")
	wantErr(t, "get missing", err, blob.ErrNotFound)
	openAll(t, b, "p/c")
	stat(t, b, "a")
	_, err = b.Stat(ctx, "missing")
	wantErr(t, "stat missing", err, blob.ErrNotFound)
	list(t, b, "")
	list(t, b, "none/")
	if err := b.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "missing"); err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(ctx, "p/c", "p/copy"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "copy missing", b.Copy(ctx, "missing", "p/copy2"), blob.ErrNotFound)
	// Refused before anything is sent: no request.
	if _, err := b.Get(ctx, "../x"); err == nil {
		t.Fatal("get ../x: no error")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Get(canceled, "p/c"); err == nil {
		t.Fatal("get with a canceled context: no error")
	}
	wantRequests(t, r, before, map[string]uint64{"put": 4, "head": 3, "get": 3, "list": 2, "delete": 2, "copy": 2})
}
