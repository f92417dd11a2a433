package task

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
)

// putStoreFiles uploads n store files of key groups [kgStart, kgEnd) to
// b, as a capture's upload does (every other one zstd-compressed), and
// returns their manifest entries and contents by name.
func putStoreFiles(t testing.TB, b blob.Bucket, kgStart, kgEnd, n, size int) ([]manifest.File, map[string][]byte) {
	t.Helper()
	var files []manifest.File
	contents := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("%06d.sst", i)
		// Hex digits: zstd halves them, as it does sstables.
		rng := rand.New(rand.NewPCG(uint64(kgStart), uint64(i)))
		data := make([]byte, size)
		for j := range data {
			data[j] = "0123456789abcdef"[rng.IntN(16)]
		}
		contents[name] = data
		var compression string
		if i%2 == 0 {
			data, compression = storeEncoder().EncodeAll(data, nil), manifest.CompressZstd
		}
		sum := sha256.Sum256(data)
		f := manifest.File{
			Key:  fmt.Sprintf("stores/%d-%d/%s", kgStart, kgEnd, name),
			Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Kind: manifest.KindStore,
			Operator: "op", KeyGroupStart: kgStart, KeyGroupEnd: kgEnd, Name: name, Compression: compression,
		}
		if err := b.Put(context.Background(), f.Key, data); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files, contents
}

// setStoreDownloads sets how many store files download at once and their
// bytes held, for one test.
func setStoreDownloads(t testing.TB, n int, bytes int64) {
	oldN, oldBytes := storeDownloads, storeDownloadBytes
	storeDownloads, storeDownloadBytes = n, bytes
	t.Cleanup(func() { storeDownloads, storeDownloadBytes = oldN, oldBytes })
}

// TestDownloadStores downloads two stores of many files, several at once
// and bounded by bytes held, and checks every file; then one whose file
// in the middle was changed in the bucket.
func TestDownloadStores(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		bytes int64
	}{
		{"one at a time", 1, 64 << 20},
		{"four at once", 4, 64 << 20},
		{"bytes held below a file", 8, 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			setStoreDownloads(t, c.n, c.bytes)
			b, err := blob.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			a, aData := putStoreFiles(t, b, 0, 4, 40, 3000)
			z, zData := putStoreFiles(t, b, 4, 8, 25, 5000)
			var read atomic.Int64
			dir := t.TempDir()
			captured, err := DownloadStores(t.Context(), b, dir, [][]manifest.File{a, z}, func(n int64) { read.Add(n) })
			if err != nil {
				t.Fatal(err)
			}
			var want int64
			for _, f := range append(a, z...) {
				want += f.Size
			}
			if read.Load() != want {
				t.Errorf("read reported %d bytes; want %d", read.Load(), want)
			}
			if len(captured) != 2 || captured[0].KeyGroupStart != 0 || captured[0].KeyGroupEnd != 4 || captured[1].KeyGroupStart != 4 || captured[1].KeyGroupEnd != 8 {
				t.Fatalf("captured %+v; want key groups [0, 4) and [4, 8)", captured)
			}
			for i, contents := range []map[string][]byte{aData, zData} {
				ents, err := os.ReadDir(captured[i].Dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(ents) != len(contents) {
					t.Errorf("store %d: %d files; want %d", i, len(ents), len(contents))
				}
				for name, data := range contents {
					got, err := os.ReadFile(filepath.Join(captured[i].Dir, name))
					if err != nil || !bytes.Equal(got, data) {
						t.Errorf("store %d: %s: %d bytes, %v; want its %d bytes", i, name, len(got), err, len(data))
					}
				}
			}

			// A file changed in the bucket: the restore fails and names it.
			bad := z[12]
			if err := b.Put(t.Context(), bad.Key, []byte("not what was uploaded")); err != nil {
				t.Fatal(err)
			}
			captured, err = DownloadStores(t.Context(), b, t.TempDir(), [][]manifest.File{a, z}, nil)
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), bad.Name) {
				t.Errorf("DownloadStores with %s changed: %v; want ErrCorruptState naming it", bad.Name, err)
			}
			if len(captured) != 2 {
				t.Errorf("DownloadStores returned %d directories after the error; want both, to remove", len(captured))
			}
		})
	}
}

// BenchmarkDownloadStores downloads a store of 96 files of 320 KiB (30
// MiB, half of them zstd-compressed) from MinIO, directly and through a
// link that delays each way by 5 ms (S3's first byte comes 10–30 ms
// after a GET), one file at a time and storeDownloads at once, and
// reports the milliseconds a restore spends downloading.
func BenchmarkDownloadStores(b *testing.B) {
	m := testenv.StartMinIO(b)
	link := testenv.NewLink(b, nil, nil, strings.TrimPrefix(m.Endpoint, "http://"))
	link.SetDelay(5 * time.Millisecond)
	for _, at := range []struct{ name, endpoint string }{
		{"loopback", m.Endpoint},
		{"5ms-each-way", "http://" + link.Addr()},
	} {
		cfg := m.S3Config()
		cfg.Endpoint = at.endpoint
		bk, err := blob.NewS3(b.Context(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bk.Close() })
		files, _ := putStoreFiles(b, bk, 0, 64, 96, 320<<10)
		for _, n := range []int{1, storeDownloads} {
			b.Run(fmt.Sprintf("%s/%d-at-once", at.name, n), func(b *testing.B) {
				setStoreDownloads(b, n, storeDownloadBytes)
				var took time.Duration
				for b.Loop() {
					dir := b.TempDir()
					start := time.Now()
					captured, err := DownloadStores(b.Context(), bk, dir, [][]manifest.File{files}, nil)
					took += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range captured {
						_ = os.RemoveAll(c.Dir)
					}
				}
				b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "restore-ms/op")
			})
		}
	}
}
