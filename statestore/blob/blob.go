// Package blob is weir's object-store client: job specs, checkpoints, state
// files and sink output all live in one bucket behind the Bucket interface.
// Two implementations pass the same contract suite (package blobtest): S3
// (aws-sdk-go-v2; AWS S3 or MinIO through a custom endpoint) and a local
// directory for the embedded mode. Open picks one from a URL
// (s3://bucket/prefix, file:///dir or a plain path); NewPrefixed gives a
// view of a bucket under a key prefix.
//
// Keys are '/'-separated relative paths with the same rules everywhere (see
// ValidateKey), so a bucket can move between a directory and S3. PutIfAbsent
// is the commit primitive: of concurrent creates of a key exactly one wins
// (If-None-Match: * on S3, a hard link in a directory).
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors returned by buckets. A backend maps its own codes to these.
var (
	// ErrNotFound is returned when a key does not exist.
	ErrNotFound = errors.New("blob: not found")
	// ErrExists is returned by PutIfAbsent when the key already exists
	// (or a concurrent create won).
	ErrExists = errors.New("blob: already exists")
)

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key      string // full key relative to the bucket (and prefix)
	Size     int64
	Modified time.Time
}

// ReaderPutter is a Bucket that can put an object from a reader, so that
// its caller need not hold the object in one slice: an encoded state file
// of hundreds of megabytes is written in chunks (offheap.Buffer) and
// uploaded from them.
type ReaderPutter interface {
	// PutReader is Put of the size bytes r reads from where it is. It may
	// seek r back there to read them again (a retried upload). A reader
	// with more or fewer bytes is an error before anything is sent.
	PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64) error
}

// PutReader puts the size bytes r reads as the object key of b: from the
// reader where b is a ReaderPutter, else read into one slice and Put.
func PutReader(ctx context.Context, b Bucket, key string, r io.ReadSeeker, size int64) error {
	if p, ok := b.(ReaderPutter); ok {
		return p.PutReader(ctx, key, r, size)
	}
	if err := checkSize(key, r, size); err != nil {
		return err
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("put %q: read the object: %w", key, err)
	}
	return b.Put(ctx, key, data)
}

// checkSize makes sure r has size bytes from where it is, and leaves it
// there, before a put sends any: from a reader with more, a put without a
// payload checksum (S3's unsigned payload) would store the first size
// bytes and report an error only after.
func checkSize(key string, r io.Seeker, size int64) error {
	at, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	end, err := r.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = r.Seek(at, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	if end-at != size {
		return fmt.Errorf("put %q: the reader has %d bytes, the size given is %d", key, end-at, size)
	}
	return nil
}

// BucketReader is the read side: what checkpoint inspection and the files
// source need.
type BucketReader interface {
	// Get returns the whole object, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns n bytes of the object from offset off: fewer if the
	// object ends first, none if it ends before off. ErrNotFound if it is
	// missing. A state object holding several state files is read so.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Open streams the object; the caller closes it. ErrNotFound if missing.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat returns the object's info, or ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix (recursively),
	// sorted by key. Its error names the prefix and the bucket (Describe):
	// callers need not repeat them.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Describe names the bucket for messages, e.g. "s3://bucket/prefix" or
	// "file:///dir". It never contains credentials.
	Describe() string
}

// Bucket is a BucketReader that can also write.
type Bucket interface {
	BucketReader
	// Put creates or replaces the object atomically: readers see the old
	// object or the whole new one, never a part.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent creates the object only if no object has the key; of
	// concurrent creates exactly one succeeds and the others get ErrExists.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Copy copies the object src to dst, replacing dst, without the bytes
	// passing through the caller where the store can (S3's CopyObject);
	// readers of dst see the old object or the whole copy. ErrNotFound if
	// src is missing.
	Copy(ctx context.Context, src, dst string) error
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the client; safe to call twice.
	Close() error
}
