package pebblestate

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// noSyncFS is the local file system without fsync: a store is scratch
// space, deleted when its task ends or its worker's next process starts,
// so nothing it writes needs to survive a crash. Pebble syncs every file
// it finishes and the directories it changes, and a file capture's links
// and copies (Checkpoint): 3 to 51 ms a capture on this project's
// machine, on the task's goroutine (BenchmarkProcessState).
type noSyncFS struct{ vfs.FS }

func (fs noSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.Create(name, c))
}

func (fs noSyncFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.Open(name, opts...))
}

func (fs noSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs noSyncFS) OpenDir(name string) (vfs.File, error) { return noSync(fs.FS.OpenDir(name)) }

func (fs noSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs noSyncFS) Unwrap() vfs.FS { return fs.FS }

func noSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// noSyncFile is a file whose syncs do nothing.
type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                { return nil }
func (noSyncFile) SyncData() error            { return nil }
func (noSyncFile) SyncTo(int64) (bool, error) { return true, nil }
