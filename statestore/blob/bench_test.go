package blob_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

var benchSizes = []struct {
	name string
	size int
}{
	{"4KiB", 4 << 10},
	{"1MiB", 1 << 20},
	{"16MiB", 16 << 20},
}

// BenchmarkPut measures one stream of Puts, overwriting one key, against
// the directory store (with fsync) and MinIO on loopback, signed and with
// unsigned payloads.
func BenchmarkPut(b *testing.B) {
	for _, bk := range benchBuckets(b) {
		b.Run(bk.name, func(b *testing.B) {
			for _, sz := range benchSizes {
				b.Run(sz.name, func(b *testing.B) {
					data := make([]byte, sz.size)
					b.SetBytes(int64(sz.size))
					for b.Loop() {
						if err := bk.b.Put(b.Context(), "bench/obj", data); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkPutParallel measures eight concurrent streams of 1 MiB Puts to
// distinct keys: the shape of a checkpoint upload.
func BenchmarkPutParallel(b *testing.B) {
	const size = 1 << 20
	for _, bk := range benchBuckets(b) {
		b.Run(bk.name, func(b *testing.B) {
			data := make([]byte, size)
			b.SetBytes(size)
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			var worker atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench/par/%d", worker.Add(1))
				for pb.Next() {
					if err := bk.b.Put(b.Context(), key, data); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkGet(b *testing.B) {
	for _, bk := range benchBuckets(b) {
		b.Run(bk.name, func(b *testing.B) {
			for _, sz := range benchSizes {
				b.Run(sz.name, func(b *testing.B) {
					if err := bk.b.Put(b.Context(), "bench/get", make([]byte, sz.size)); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(sz.size))
					for b.Loop() {
						if _, err := bk.b.Get(b.Context(), "bench/get"); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

type namedBucket struct {
	name string
	b    blob.Bucket
}

func benchBuckets(b *testing.B) []namedBucket {
	b.Helper()
	d, err := blob.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	m := testenv.StartMinIO(b)
	signed := newS3(b, m.S3Config())
	cfg := m.S3Config()
	cfg.UnsignedPayload = true
	unsigned := newS3(b, cfg)
	return []namedBucket{{"dir", d}, {"minio", signed}, {"minio-unsigned", unsigned}}
}
