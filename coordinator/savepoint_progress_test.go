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

// copyHook calls hook before every Copy.
type copyHook struct {
	blob.Bucket
	hook func(src string)
}

func (b copyHook) Copy(ctx context.Context, src, dst string) error {
	b.hook(src)
	return b.Bucket.Copy(ctx, src, dst)
}

// copySavepoint copies each state object once, on the store's side, and
// counts it as it does: an object packed with several files counts their
// bytes, and the savepoint's entries point into its copy.
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
	// Two files packed into one object of 1,500 bytes: 500 at 0, 1,000
	// at 500.
	p := file("_workers/w-1/5-a1-1.arrow", 1500, 0, 64)
	pa, pb := p, p
	pa.Packed, pa.Offset, pa.Size, pa.Operator = true, 0, 500, "v"
	pb.Packed, pb.Offset, pb.Size, pb.Operator, pb.KeyGroupStart, pb.KeyGroupEnd = true, 500, 1000, "v", 64, 128
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &manifest.Manifest{Version: manifest.Version, Job: job, Checkpoint: 5, Attempt: 1, Triggered: t0, Completed: t0.Add(time.Second),
		MaxParallelism: 128, SpecSHA256: strings.Repeat("ab", 32),
		Vertices: []manifest.Vertex{{Name: "w", Keyed: true, Parallelism: 2, Subtasks: []manifest.Subtask{
			{Index: 0, KeyGroupStart: 0, KeyGroupEnd: 64, State: []manifest.File{a, pa}},
			{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 128, State: []manifest.File{b, pb}},
		}}}}
	cp := newSavepointCopy(m)
	var seen []SavepointProgress
	var copied []string
	c := New(Config{Bucket: copyHook{Bucket: dir, hook: func(src string) {
		seen = append(seen, *cp.progress())
		copied = append(copied, src)
	}}})
	key, err := c.copySavepoint(ctx, m, cp)
	if err != nil {
		t.Fatal(err)
	}
	want := []SavepointProgress{
		{Checkpoint: 5, Files: 0, FilesTotal: 3, Bytes: 0, BytesTotal: 5500},
		{Checkpoint: 5, Files: 1, FilesTotal: 3, Bytes: 1000, BytesTotal: 5500},
		{Checkpoint: 5, Files: 2, FilesTotal: 3, Bytes: 2500, BytesTotal: 5500},
	}
	if len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Errorf("progress before each copy %+v, want %+v", seen, want)
	}
	if len(copied) != 3 || copied[1] != p.Key {
		t.Errorf("copied %q, want a.arrow, the packed object once, b.arrow", copied)
	}
	if got := *cp.progress(); got.Files != 3 || got.Bytes != 5500 {
		t.Errorf("after the copy %+v, want all 3 objects, 5500 bytes", got)
	}
	raw, err := dir.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := manifest.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	got := sp.Vertices[0].Subtasks[1].State[1]
	if !got.Packed || got.Offset != 500 || got.Size != 1000 || !strings.HasPrefix(got.Key, "jobs/"+job+"/savepoints/") {
		t.Errorf("the savepoint's entry of a packed file: %+v", got)
	}
	if data, err := dir.GetRange(ctx, got.Key, got.Offset, got.Size); err != nil || len(data) != 1000 {
		t.Errorf("its range in the copy: %d bytes, %v", len(data), err)
	}
}
