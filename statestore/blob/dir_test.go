package blob_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/blob/blobtest"
)

func newDir(t *testing.T) (blob.Bucket, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "store")
	b, err := blob.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return b, root
}

func TestDir(t *testing.T) {
	blobtest.TestBucket(t, func(t *testing.T) blob.Bucket {
		b, _ := newDir(t)
		return b
	})
}

func TestDirPrefixed(t *testing.T) {
	blobtest.TestBucket(t, func(t *testing.T) blob.Bucket {
		b, _ := newDir(t)
		for _, k := range []string{"decoy", "tenant/decoy", "tenant/weir-x/decoy", "tenant/weirdecoy"} {
			if err := b.Put(t.Context(), k, []byte("decoy")); err != nil {
				t.Fatal(err)
			}
		}
		return blob.NewPrefixed(b, "tenant/weir")
	})
}

// TestDirStaysInRoot checks that no key reaches outside the root, and that
// nothing but the object lands in it.
func TestDirStaysInRoot(t *testing.T) {
	b, root := newDir(t)
	parent := filepath.Dir(root)
	for _, k := range []string{"../escape", "a/../../escape", "/tmp/escape", "a/../../../../../../tmp/escape"} {
		if err := b.Put(t.Context(), k, []byte("x")); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("put %q: %v, want ErrInvalidKey", k, err)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Fatalf("entries next to the root: %v", entries)
	}
	if err := b.Put(t.Context(), "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := filesUnder(t, root); !slices.Equal(got, []string{"a/b"}) {
		t.Fatalf("files in the root: %q, want only a/b (no temporary files)", got)
	}
}

// TestDirIgnoresTempFiles: a crash between write and rename leaves a
// temporary file, which must never be listed.
func TestDirIgnoresTempFiles(t *testing.T) {
	b, root := newDir(t)
	if err := b.Put(t.Context(), "cp/1/data", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".weir-tmp-1234", "cp/1/.weir-tmp-abcd"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := b.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "cp/1/data" {
		t.Fatalf("list: %+v, want only cp/1/data", infos)
	}
}

func TestDirDeleteRemovesEmptyParents(t *testing.T) {
	b, root := newDir(t)
	ctx := t.Context()
	for _, k := range []string{"jobs/j/checkpoints/1/a", "jobs/j/checkpoints/1/b", "jobs/j/spec.json"} {
		if err := b.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"jobs/j/checkpoints/1/a", "jobs/j/checkpoints/1/b"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "jobs/j/checkpoints")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty checkpoints dir left behind: %v", err)
	}
	if err := b.Delete(ctx, "jobs/j/spec.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("the root itself must stay: %v", err)
	}
	if got := filesUnder(t, root); len(got) != 0 {
		t.Fatalf("left behind: %q", got)
	}
}

func TestNewDirErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.NewDir(file); err == nil {
		t.Fatal("NewDir on a file: no error")
	}
	if _, err := blob.NewDir(""); err == nil {
		t.Fatal("NewDir(\"\"): no error")
	}
}

// filesUnder lists every entry under root (files and directories other
// than root), as slash paths.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDirConcurrentPutDelete races writers against deletes that remove
// the directories the writers need.
func TestDirConcurrentPutDelete(t *testing.T) {
	b, _ := newDir(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				key := fmt.Sprintf("a/b/c/%d-%d", w, i%3)
				if err := b.Put(ctx, key, []byte("x")); err != nil {
					errs <- err
					return
				}
				if err := b.Delete(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
