package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/manifest"
)

// putHook calls hook before every Put.
type putHook struct {
	blob.Bucket
	hook func(key string)
}

func (b putHook) Put(ctx context.Context, key string, data []byte) error {
	b.hook(key)
	return b.Bucket.Put(ctx, key, data)
}

// copySavepoint counts each distinct state file once, as it copies it.
func TestSavepointCopyProgress(t *testing.T) {
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	ctx := context.Background()
	const job = "sp-0a1b2c3d"
	file := func(name string, size int, kg0, kg1 int) manifest.File {
		data := []byte(strings.Repeat("x", size))
		key := "jobs/" + job + "/state/w/" + name
		if err := dir.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		return manifest.File{Key: key, Size: int64(size), SHA256: hex.EncodeToString(sum[:]), Kind: manifest.KindBase,
			Operator: "w", KeyGroupStart: kg0, KeyGroupEnd: kg1}
	}
	a, b := file("a.arrow", 1000, 0, 64), file("b.arrow", 3000, 64, 128)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &manifest.Manifest{Version: manifest.Version, Job: job, Checkpoint: 5, Attempt: 1, Triggered: t0, Completed: t0.Add(time.Second),
		MaxParallelism: 128, SpecSHA256: strings.Repeat("ab", 32),
		Vertices: []manifest.Vertex{{Name: "w", Keyed: true, Parallelism: 2, Subtasks: []manifest.Subtask{
			{Index: 0, KeyGroupStart: 0, KeyGroupEnd: 64, State: []manifest.File{a}},
			{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 128, State: []manifest.File{b}},
		}}}}
	cp := newSavepointCopy(m)
	var seen []SavepointProgress
	c := New(Config{Bucket: putHook{Bucket: dir, hook: func(string) { seen = append(seen, *cp.progress()) }}})
	if _, err := c.copySavepoint(ctx, m, cp); err != nil {
		t.Fatal(err)
	}
	want := []SavepointProgress{
		{Checkpoint: 5, Files: 0, FilesTotal: 2, Bytes: 0, BytesTotal: 4000},
		{Checkpoint: 5, Files: 1, FilesTotal: 2, Bytes: 1000, BytesTotal: 4000},
	}
	if len(seen) < 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("progress before each copy %+v, want %+v", seen, want)
	}
	if got := *cp.progress(); got.Files != 2 || got.Bytes != 4000 {
		t.Errorf("after the copy %+v, want all 2 files, 4000 bytes", got)
	}
}
