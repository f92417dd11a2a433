// Package statepack writes the state files that a worker's subtasks of one
// job attempt take at one checkpoint as one object, so that the requests a
// checkpoint makes grow with workers, not with subtasks × operators.
//
// A Group is one job attempt on one worker; each stateful task joins it
// and writes every checkpoint's files through its Member. The files of a
// checkpoint wait until every member has taken that checkpoint (or a
// later one), or has left, or until Linger has passed; then one of the
// writers uploads them, concatenated, as layout.StateObjectKey, and each
// gets its files' manifest entries back with Packed set and their Offset
// in the object. A restore reads a packed file with a ranged GET
// (statefile.Read). Garbage collection is unchanged: an object is kept
// while a retained manifest lists any file in it.
//
// Which files go together is decided by gather, a plain state machine
// with trace tests (testdata/); the Group does the I/O on the goroutines
// of its writers and starts none of its own.
package statepack

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// DefaultLinger is Config.Linger by default: how long files wait for the
// other members' files of the same checkpoint.
const DefaultLinger = 5 * time.Second

// Config is a Group's job attempt and worker.
type Config struct {
	Bucket  blob.Bucket
	Job     string
	Attempt int
	Worker  string // the worker's id, part of the objects' keys
	// Linger bounds how long files wait for the other members' files of
	// their checkpoint (default DefaultLinger). A checkpoint completes
	// only once every subtask has acknowledged it, so waiting for a
	// slower member delays no checkpoint; Linger only stops a member that
	// is far behind, or stuck, from holding the others' files.
	Linger time.Duration
	Now    func() time.Time // default time.Now
	// Written, if set, is called after each object is written with the
	// number of state files in it (the worker's metrics count them).
	Written func(files int)
}

// File is one encoded state file (statefile.Encode): its manifest entry
// and its bytes.
type File struct {
	Entry manifest.File
	Data  []byte
}

// Group packs the state files of one job attempt on one worker. It is
// safe for concurrent use by its members.
type Group struct {
	cfg Config

	mu      sync.Mutex
	g       *gather
	batches map[int]*pending // by batch sequence number, until every writer has its result
	changed chan struct{}    // closed and replaced when a batch closes or completes, or a member reports or leaves
	objects int              // objects written (Stats)
	files   int
}

// pending is the data of one batch, and its result once uploaded.
type pending struct {
	files   map[int][]File // by member
	done    bool
	err     error
	entries map[int][]manifest.File // by member, once done
}

// New returns an empty Group.
func New(cfg Config) *Group {
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Group{cfg: cfg, g: newGather(cfg.Linger), batches: map[int]*pending{}, changed: make(chan struct{})}
}

// Member is one task of a Group. Its Write calls come one at a time, in
// checkpoint order.
type Member struct {
	grp *Group
	id  int
}

// Join adds a member. A task joins before it takes its first checkpoint.
func (g *Group) Join() *Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return &Member{grp: g, id: g.g.join()}
}

// Leave removes the member; the others' files no longer wait for it.
func (m *Member) Leave() {
	g := m.grp
	g.mu.Lock()
	defer g.mu.Unlock()
	g.g.leave(m.id)
	g.notify()
}

// Stats is what a Group has written.
type Stats struct {
	Objects int // objects uploaded
	Files   int // state files in them
}

// Stats returns what the Group has written so far.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Objects: g.objects, Files: g.files}
}

// notify wakes every writer waiting for a change (g.mu held).
func (g *Group) notify() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// Write writes the member's state files of checkpoint, packed with the
// other members' files of it, and returns their manifest entries in the
// order given. It returns once the object is in the bucket. With no files
// it only reports that the member took (or declined) the checkpoint, and
// returns at once. An error writing the object is every writer's error.
func (m *Member) Write(ctx context.Context, checkpoint int64, files []File) ([]manifest.File, error) {
	g := m.grp
	g.mu.Lock()
	seq := g.g.report(m.id, checkpoint, len(files) > 0, g.cfg.Now())
	if seq == 0 {
		g.notify()
		g.mu.Unlock()
		if len(files) > 0 {
			return nil, fmt.Errorf("state files of checkpoint %d: the task has left its state group", checkpoint)
		}
		return nil, nil
	}
	p := g.batches[seq]
	if p == nil {
		p = &pending{files: map[int][]File{}}
		g.batches[seq] = p
	}
	p.files[m.id] = files
	g.notify()
	for {
		if p.done {
			entries, err := m.take(p, seq)
			g.mu.Unlock()
			return entries, err
		}
		if due := g.g.due(g.cfg.Now()); len(due) > 0 {
			g.mu.Unlock()
			for _, b := range due {
				g.upload(ctx, b)
			}
			g.mu.Lock()
			continue
		}
		changed := g.changed
		// An open batch is due by its deadline; one being uploaded
		// completes with a change.
		var expire <-chan time.Time
		var timer *time.Timer
		if d := g.g.deadline(seq); !d.IsZero() {
			timer = time.NewTimer(max(d.Sub(g.cfg.Now()), time.Millisecond))
			expire = timer.C
		}
		g.mu.Unlock()
		var canceled bool
		select {
		case <-changed:
		case <-expire:
		case <-ctx.Done():
			canceled = true
		}
		if timer != nil {
			timer.Stop()
		}
		if canceled {
			g.mu.Lock()
			if g.g.withdraw(m.id, seq) {
				delete(p.files, m.id)
				if len(p.files) == 0 {
					delete(g.batches, seq)
				}
				g.notify()
				g.mu.Unlock()
				return nil, ctx.Err()
			}
			// The batch is being uploaded with the files: wait for it.
			g.mu.Unlock()
			return m.await(p, seq)
		}
		g.mu.Lock()
	}
}

// await waits for the upload of batch seq that the member's files went
// into, once its own context is done.
func (m *Member) await(p *pending, seq int) ([]manifest.File, error) {
	g := m.grp
	g.mu.Lock()
	defer g.mu.Unlock()
	for !p.done {
		changed := g.changed
		g.mu.Unlock()
		<-changed
		g.mu.Lock()
	}
	return m.take(p, seq)
}

// take returns the member's result of uploaded batch seq and forgets it;
// the last writer to take its result forgets the batch (g.mu held).
func (m *Member) take(p *pending, seq int) ([]manifest.File, error) {
	entries, err := p.entries[m.id], p.err
	delete(p.entries, m.id)
	delete(p.files, m.id)
	if len(p.files) == 0 {
		delete(m.grp.batches, seq)
	}
	return entries, err
}

// upload writes batch b as one object and completes it.
func (g *Group) upload(ctx context.Context, b *batch) {
	// The batch is closed: its files are fixed, and their writers wait
	// for done.
	g.mu.Lock()
	p := g.batches[b.seq]
	ids := b.members()
	files := make([][]File, len(ids))
	var size, n int
	for i, id := range ids {
		files[i] = p.files[id]
		for _, f := range files[i] {
			size += len(f.Data)
			n++
		}
	}
	g.mu.Unlock()
	key := layout.StateObjectKey(g.cfg.Job, g.cfg.Worker, b.checkpoint, g.cfg.Attempt, b.seq)
	data := make([]byte, 0, size)
	entries := map[int][]manifest.File{}
	for i, id := range ids {
		for _, f := range files[i] {
			e := f.Entry
			e.Key, e.Packed, e.Offset = key, true, int64(len(data))
			data = append(data, f.Data...)
			entries[id] = append(entries[id], e)
		}
	}
	err := g.cfg.Bucket.Put(ctx, key, data)
	if err != nil {
		err = fmt.Errorf("upload state object %s: %w", key, err)
		entries = nil
	}
	if err == nil && g.cfg.Written != nil {
		g.cfg.Written(n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p.done, p.err, p.entries = true, err, entries
	if err == nil {
		g.objects++
		g.files += n
	}
	g.notify()
}

// members is the members whose files the batch holds, in id order.
func (b *batch) members() []int {
	ids := make([]int, 0, len(b.in))
	for id := range b.in {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
