package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// dirBucket is a Bucket in a local directory; see NewDir.
type dirBucket struct {
	root string // absolute, cleaned
	// reqs counts the requests S3 would receive for the same calls: a
	// put per Put or PutIfAbsent (and a head when PutIfAbsent finds the
	// key taken, as the S3 bucket checks whether the winner was itself),
	// a get per Get or Open, a head per Stat, a list per 1,000 keys
	// listed (at least one), a delete per Delete. Embedded runs can then
	// be checked for the bill they would cost.
	reqs *Requests
}

var (
	_ Bucket       = (*dirBucket)(nil)
	_ ReaderPutter = (*dirBucket)(nil)
)

// NewDir opens a Bucket in the local directory root (the embedded mode),
// creating the directory if it is missing. A key "a/b/c" is the file
// <root>/a/b/c.
//
// Writes go to a temporary file (".weir-tmp-*") in the target directory,
// are fsynced and then renamed (Put) or hard-linked (PutIfAbsent) into
// place, so readers never see part of an object and of concurrent creates
// exactly one wins. Temporary files left by a crash are never listed.
//
// Unlike S3, a directory cannot hold both "a" and "a/b": the second Put
// fails.
//
// The bucket counts its calls as the requests S3 would receive for them,
// into a counter of its own (RequestsOf; Open with Options.Requests
// shares one).
func NewDir(root string) (Bucket, error) { return newDir(root, nil) }

// listPage is how many keys one ListObjectsV2 request returns at most.
const listPage = 1000

func newDir(root string, reqs *Requests) (Bucket, error) {
	if reqs == nil {
		reqs = NewRequests()
	}
	if root == "" {
		return nil, errors.New("open directory store: empty path")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open directory store %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("open directory store %q: %w", root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open directory store %q: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open directory store %q: not a directory", root)
	}
	return &dirBucket{root: abs, reqs: reqs}, nil
}

func (d *dirBucket) requests() *Requests { return d.reqs }

// Describe returns "file://<root>".
func (d *dirBucket) Describe() string { return "file://" + filepath.ToSlash(d.root) }

// Close does nothing; a directory store holds no resources.
func (d *dirBucket) Close() error { return nil }

func (d *dirBucket) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// isMissing reports whether a filesystem error means "no such object": the
// file is absent, a parent is a file, or the key names a directory.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

func (d *dirBucket) errorf(op, key string, err error) error {
	if isMissing(err) {
		err = ErrNotFound
	}
	return fmt.Errorf("%s %q in %s: %w", op, key, d.Describe(), err)
}

// openRegular opens the object's file, refusing directories.
func (d *dirBucket) openRegular(ctx context.Context, op, key string) (*os.File, fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", op, key, err)
	}
	p, err := d.path(key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	d.reqs.Add(OpGet, 1)
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, d.errorf(op, key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, d.errorf(op, key, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, d.errorf(op, key, ErrNotFound)
	}
	return f, st, nil
}

// Get returns the whole object, or ErrNotFound.
func (d *dirBucket) Get(ctx context.Context, key string) ([]byte, error) {
	f, st, err := d.openRegular(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, d.errorf("get", key, err)
	}
	return buf.Bytes(), nil
}

// GetRange returns n bytes of the object from off (fewer where it ends).
func (d *dirBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get range %q: offset %d, length %d: want both >= 0", key, off, n)
	}
	f, st, err := d.openRegular(ctx, "get range", key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n = max(0, min(n, st.Size()-off))
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, d.errorf("get range", key, err)
	}
	return buf, nil
}

// Open streams the object, or returns ErrNotFound. The file stays readable
// (and whole) even if the object is replaced or deleted meanwhile.
func (d *dirBucket) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	f, _, err := d.openRegular(ctx, "open", key)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Stat returns the object's info, or ErrNotFound.
func (d *dirBucket) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, fmt.Errorf("stat %q: %w", key, err)
	}
	p, err := d.path(key)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat: %w", err)
	}
	d.reqs.Add(OpHead, 1)
	st, err := os.Stat(p)
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotFound
	}
	if err != nil {
		return ObjectInfo{}, d.errorf("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: st.Size(), Modified: st.ModTime()}, nil
}

// List returns every object whose key starts with prefix, sorted by key.
// Objects created or deleted during the walk may or may not be listed.
func (d *dirBucket) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	// Walk only the deepest directory the prefix names completely.
	start := d.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if isMissing(err) {
				return nil // removed during the walk, or no such prefix
			}
			return err
		}
		if e.IsDir() || !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tmpPrefix) {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			if isMissing(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	d.reqs.Add(OpList, uint64(max(1, (len(out)+listPage-1)/listPage)))
	if err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", prefix, d.Describe(), err)
	}
	// Walk order is per directory, which differs from key order ("a/b" is
	// walked before "a-c" but sorts after it).
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Put writes the object atomically: a temporary file is written, fsynced
// and renamed over the key.
func (d *dirBucket) Put(ctx context.Context, key string, data []byte) error {
	return d.put(ctx, "put", key, bytes.NewReader(data), false)
}

// PutIfAbsent creates the object only if the key is free, by hard-linking a
// complete temporary file to the key's name: the link either creates the
// name or fails with EEXIST, so of concurrent creates exactly one wins.
func (d *dirBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return d.put(ctx, "put-if-absent", key, bytes.NewReader(data), true)
}

func (d *dirBucket) put(ctx context.Context, op, key string, data io.Reader, exclusive bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w", op, key, err)
	}
	p, err := d.path(key)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	d.reqs.Add(OpPut, 1)
	return d.write(op, key, p, data, exclusive)
}

// PutReader is Put from a reader (ReaderPutter): the temporary file is
// written from it.
func (d *dirBucket) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	if err := checkSize(key, r, size); err != nil {
		return err
	}
	return d.put(ctx, "put", key, r, false)
}

// Copy copies the object src to dst, replacing dst: the bytes are read
// and written to a new file renamed into place, counted as the one
// CopyObject S3 would receive. ErrNotFound if src is missing.
func (d *dirBucket) Copy(ctx context.Context, src, dst string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	sp, err := d.path(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	dp, err := d.path(dst)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	d.reqs.Add(OpCopy, 1)
	st, err := os.Stat(sp)
	if err == nil && !st.Mode().IsRegular() {
		err = ErrNotFound
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(sp)
	}
	if err != nil {
		return d.errorf("copy", src, err)
	}
	return d.write("copy to", dst, dp, bytes.NewReader(data), false)
}

// write writes data to the file p of key: a new fsynced file renamed (or,
// exclusive, linked) into place, its directory synced.
func (d *dirBucket) write(op, key, p string, data io.Reader, exclusive bool) error {
	dir := filepath.Dir(p)
	tmp, err := d.writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("%s %q in %s: %w", op, key, d.Describe(), err)
	}
	if exclusive {
		err = os.Link(tmp, p)
		_ = os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			d.reqs.Add(OpHead, 1) // S3 asks whether the winner was this call
			return fmt.Errorf("%s %q in %s: %w", op, key, d.Describe(), ErrExists)
		}
	} else {
		err = os.Rename(tmp, p)
		if err != nil {
			_ = os.Remove(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %q in %s: %w", op, key, d.Describe(), err)
	}
	// Make the new name durable, not only the bytes.
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%s %q in %s: %w", op, key, d.Describe(), err)
	}
	return nil
}

// writeTemp writes what data reads to a new fsynced temporary file in dir,
// creating dir if needed, and returns its path.
func (d *dirBucket) writeTemp(dir string, data io.Reader) (string, error) {
	var (
		f   *os.File
		err error
	)
	// A concurrent Delete may remove an (empty) directory between MkdirAll
	// and the create, or in the middle of MkdirAll (which then reports
	// "file exists": its mkdir lost to another writer's, whose directory
	// was gone again when it looked); try again a few times.
	for attempt := 0; ; attempt++ {
		err = os.MkdirAll(dir, 0o755)
		if err == nil {
			f, err = os.OpenFile(filepath.Join(dir, tmpPrefix+randomHex(8)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		}
		retry := errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist)
		if err == nil || !retry || attempt == 9 {
			break
		}
	}
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = io.Copy(f, data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delete removes the object, then any parent directories it leaves empty
// (best effort). Deleting a missing key is not an error.
func (d *dirBucket) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	p, err := d.path(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	d.reqs.Add(OpDelete, 1)
	st, err := os.Lstat(p)
	if isMissing(err) || (err == nil && st.IsDir()) {
		return nil // no object by that name
	}
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil && !isMissing(err) {
		return fmt.Errorf("delete %q in %s: %w", key, d.Describe(), err)
	}
	// rmdir fails on a directory that is not empty, including one holding
	// a concurrent writer's temporary file, so this never loses data.
	for dir := filepath.Dir(p); dir != d.root && strings.HasPrefix(dir, d.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
