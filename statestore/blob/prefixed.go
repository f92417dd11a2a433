package blob

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// prefixed is a Bucket whose keys live under a prefix of another bucket.
type prefixed struct {
	b      Bucket
	prefix string // ends in '/'
	err    error  // an invalid prefix, returned by every call
}

var (
	_ Bucket       = (*prefixed)(nil)
	_ ReaderPutter = (*prefixed)(nil)
)

// NewPrefixed returns a view of b in which every key is stored as
// prefix + "/" + key; List takes and returns keys relative to the prefix.
// Leading and trailing '/' in prefix are ignored; an empty prefix returns b.
// An invalid prefix (see ValidateKey) makes every call fail with
// ErrInvalidKey. Closing the view closes b.
func NewPrefixed(b Bucket, prefix string) Bucket {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return b
	}
	p := &prefixed{b: b, prefix: prefix + "/"}
	if err := ValidateKey(prefix); err != nil {
		p.err = fmt.Errorf("prefix of %s: %w", b.Describe(), err)
	}
	return p
}

func (p *prefixed) requests() *Requests { return RequestsOf(p.b) }

func (p *prefixed) Describe() string {
	return strings.TrimSuffix(p.b.Describe(), "/") + "/" + strings.TrimSuffix(p.prefix, "/")
}

// full checks key on its own, so messages name the key the caller gave.
func (p *prefixed) full(key string) (string, error) {
	if p.err != nil {
		return "", p.err
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return p.prefix + key, nil
}

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := p.full(key)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return p.b.Get(ctx, k)
}

func (p *prefixed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	k, err := p.full(key)
	if err != nil {
		return nil, fmt.Errorf("get range: %w", err)
	}
	return p.b.GetRange(ctx, k, off, n)
}

func (p *prefixed) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.full(key)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return p.b.Open(ctx, k)
}

func (p *prefixed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := p.full(key)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat: %w", err)
	}
	info, err := p.b.Stat(ctx, k)
	if err != nil {
		return ObjectInfo{}, err
	}
	info.Key = key
	return info, nil
}

func (p *prefixed) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if p.err != nil {
		return nil, fmt.Errorf("list: %w", p.err)
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := p.b.List(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	// Removing a common prefix keeps the order.
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.prefix)
	}
	return infos, nil
}

func (p *prefixed) Put(ctx context.Context, key string, data []byte) error {
	k, err := p.full(key)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return p.b.Put(ctx, k, data)
}

// PutReader streams to the bucket underneath where it can (ReaderPutter).
func (p *prefixed) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	k, err := p.full(key)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return PutReader(ctx, p.b, k, r, size)
}

func (p *prefixed) Copy(ctx context.Context, src, dst string) error {
	s, err := p.full(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	d, err := p.full(dst)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	return p.b.Copy(ctx, s, d)
}

func (p *prefixed) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := p.full(key)
	if err != nil {
		return fmt.Errorf("put-if-absent: %w", err)
	}
	return p.b.PutIfAbsent(ctx, k, data)
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	k, err := p.full(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return p.b.Delete(ctx, k)
}

func (p *prefixed) Close() error { return p.b.Close() }
