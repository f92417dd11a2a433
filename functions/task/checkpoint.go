package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/offheap"
	"github.com/weirstream/weir/statestore/pebblestate"
	"github.com/weirstream/weir/statestore/statefile"
	"github.com/weirstream/weir/statestore/statepack"
)

// Checkpointing is a task's part in the job's checkpoints (DESIGN.md,
// "Checkpoints"). A task without it refuses barriers.
type Checkpointing struct {
	// Ack receives the task's acknowledgement of every checkpoint it took,
	// in checkpoint order, once the checkpoint's files are uploaded, and a
	// last one with Final set when the task has finished its input, before
	// Run returns. It is called from a goroutine of the task's.
	Ack func(Ack)
	// Restore is the checkpoint to start from; nil starts empty.
	Restore *Restore
	// MaxDeltas is how many deltas may follow a base before the next
	// snapshot of an operator is a base again (default 64: it bounds the
	// files a restore reads). A base is also taken once the deltas' bytes
	// reach the base's, so restore reads at most about twice the state,
	// and a checkpoint where 1% of the keys changed uploads about 1%.
	MaxDeltas int
	// PartBytes is the size of the state files a capture in steps that
	// can hand out its rows in parts (statestore.PartedCapture: a
	// process function's backend, a window) is uploaded in, one per key
	// group range, while the capture goes on, so that a large base is
	// never in memory whole (default DefaultPartBytes; see partBytes).
	PartBytes int
	// Compression is the codec of the state files' buffers (the job's
	// checkpoint.compression: lz4 unless it says zstd or none). The zero
	// value, arrowfmt.CompressNone, writes them uncompressed.
	Compression arrowfmt.Compression
	// Pack, if set, is the task's job attempt on its worker: the task
	// joins it, and its state files of a checkpoint up to MaxPackedFile
	// bytes go into one object with those of the worker's other tasks
	// (package statepack). Nil uploads each file as its own object.
	Pack *statepack.Group
}

// MaxPackedFile is the largest state file a task packs with others (see
// Checkpointing.Pack); a larger one is its own object, where a request
// costs little beside its bytes.
const MaxPackedFile = 8 << 20

// DefaultPartBytes is Checkpointing.PartBytes by default.
const DefaultPartBytes = 32 << 20

// maxPartsInFlight bounds the parts of a capture captured and not yet
// uploaded: a capture waits for the uploads rather than hold more.
const maxPartsInFlight = 2

// Ack is a subtask's acknowledgement of a checkpoint: the manifest entry
// of the subtask, or why it could not take the checkpoint; the cluster
// protocol carries it to the coordinator as it is.
type Ack = control.Ack

// Restore is what a subtask starts from: its share of a checkpoint.
type Restore struct {
	Checkpoint int64
	// Files holds, per operator of the chain, the state files to apply in
	// order. They may cover more key groups than the subtask owns (after
	// rescaling); the task keeps its own.
	Files map[string][]manifest.File
	// Continue marks operators whose Files are exactly one earlier
	// subtask's chain over the same key groups: the next checkpoint may
	// add a delta to them instead of a new base.
	Continue map[string]bool
	// SourcePosition is the chain's source position (see
	// sourceCheckpoint), nil for none.
	SourcePosition json.RawMessage
	// Watermark is the event time at the barrier, nil for none.
	Watermark *int64
}

// ErrCorruptState is wrapped by restore errors about a state file that is
// missing or does not match its manifest entry: the checkpoint cannot be
// restored, an older one may.
var ErrCorruptState = errors.New("corrupt checkpoint state")

// sourceCheckpoint is what a checkpoint records of a source: the source's
// own position, the largest event time it had read, so that watermarks
// continue where they were, and how many dead letters it had sent, so that
// the count goes on over attempts.
type sourceCheckpoint struct {
	Position     json.RawMessage `json:"position"`
	MaxTimestamp *int64          `json:"maxTimestamp,omitempty"`
	DeadLetters  int64           `json:"deadLetters,omitempty"`
}

// SourceRestore names the source of a chain being restored (Name "" for
// none) and says whether it is made of splits (SourceHead.Splits).
type SourceRestore struct {
	Name   string
	Splits bool
}

// RestoreFor picks what subtask subtask (of parallelism parallelism,
// owning key groups [kgStart, kgEnd)) of vertex restores from manifest m:
// the state files of its stateful operators, its source's position and
// its watermark. A source restores the position its subtask recorded, and
// only at the parallelism it was taken at; a source of splits restores at
// any, and gets the splits of every old subtask merged (mergeSplits), at
// the same parallelism too, so a split that changed owner keeps its place.
func RestoreFor(m *manifest.Manifest, vertex string, subtask, parallelism, kgStart, kgEnd int, stateful []string, source SourceRestore) (*Restore, error) {
	r := &Restore{Checkpoint: m.Checkpoint, Files: map[string][]manifest.File{}, Continue: map[string]bool{}}
	for _, op := range stateful {
		var from []int // (vertex, subtask) contributions, for Continue
		exact := false
		for _, v := range m.Vertices {
			for _, st := range v.Subtasks {
				var fs []manifest.File
				for _, f := range st.State {
					if f.Operator == op && f.KeyGroupStart < kgEnd && kgStart < f.KeyGroupEnd {
						fs = append(fs, f)
					}
				}
				if len(fs) > 0 {
					r.Files[op] = append(r.Files[op], fs...)
					from = append(from, st.Index)
					exact = st.KeyGroupStart == kgStart && st.KeyGroupEnd == kgEnd
				}
			}
		}
		r.Continue[op] = len(from) == 1 && exact
	}
	var old []json.RawMessage // a source of splits: every old subtask's position
	own := -1                 // the index in old of this subtask's, at the same parallelism
	for _, v := range m.Vertices {
		if v.Name == vertex && v.Parallelism == parallelism {
			r.Watermark = v.Subtasks[subtask].Watermark
		}
		for _, st := range v.Subtasks {
			pos, ok := st.SourcePositions[source.Name]
			if source.Name == "" || !ok {
				continue
			}
			same := v.Parallelism == parallelism
			if !same && !source.Splits {
				return nil, fmt.Errorf("checkpoint %d: source %s ran at parallelism %d; restoring it at %d is not supported (keep the source's parallelism)", m.Checkpoint, source.Name, v.Parallelism, parallelism)
			}
			if same && st.Index == subtask {
				r.SourcePosition = pos
				own = len(old)
			}
			if source.Splits {
				old = append(old, pos)
			}
		}
	}
	if len(old) > 0 && !(own >= 0 && !allSplits(old)) {
		// At the same parallelism too: a split whose owner changed (the
		// listing of splits grew in between) keeps its position. A
		// checkpoint from before the source had splits restores as taken.
		merged, err := mergeSplits(old, subtask == 0, own)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: source %s: %w", m.Checkpoint, source.Name, err)
		}
		r.SourcePosition = merged
	}
	if r.Watermark == nil {
		// Restored at another parallelism: start at the lowest
		// watermark any earlier subtask had, so nothing is judged later
		// than it was.
		for _, v := range m.Vertices {
			if v.Name != vertex {
				continue
			}
			for _, st := range v.Subtasks {
				if st.Watermark == nil {
					r.Watermark = nil
					break
				}
				if r.Watermark == nil || *st.Watermark < *r.Watermark {
					w := *st.Watermark
					r.Watermark = &w
				}
			}
		}
	}
	return r, nil
}

// chain is the files of one stateful operator that a restore applies: a
// base and the deltas after it. The task goroutine decides base or delta
// when it captures; the uploader extends the chain as uploads succeed.
// Generations tie deltas to their base: a delta is only valid on top of
// the base (and the deltas) it was captured after.
type chain struct {
	mu        sync.Mutex
	files     []manifest.File // uploaded: base first
	baseBytes int64
	deltaB    int64
	capGen    int  // generation of the last base captured, 0 for none
	captured  int  // deltas captured since it
	upGen     int  // generation of the base in files, 0 for none
	failed    int  // a generation whose chain broke (an upload failed)
	broken    bool // the next capture must be a base
	// store is the files of the operator's store as last uploaded
	// (statestore.StoreCapturer), listed after the chain's; uploaded
	// maps the immutable ones by name, so that a later capture lists a
	// file it shares under the key it was uploaded to.
	store    []manifest.File
	uploaded map[string]manifest.File
}

// capture decides whether the next snapshot is a base and returns its
// generation.
func (c *chain) capture(maxDeltas int) (full bool, gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	full = c.broken || c.capGen == 0 || c.captured >= maxDeltas || (c.upGen == c.capGen && c.deltaB >= c.baseBytes)
	if full {
		c.capGen++
		c.captured = 0
		c.broken = false
	} else {
		c.captured++
	}
	return full, c.capGen
}

// capture is one operator's part of a snapshot, to upload: its batches,
// or the capture in steps that will give them.
type captured struct {
	node    int
	full    bool
	gen     int
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	capture statestore.Capture // nil once done
	// parted: the capture hands out parts, uploaded ahead of the
	// checkpoint (partUpload); held are parts taken and not yet queued
	// (no upload slot was free); holds: the capture goes on while parts
	// are held (statestore.PartHolder).
	parted, holds bool
	held          []statestore.Part
	// store is the capture of the operator's store as files
	// (statestore.StoreCapturer), nil for none; storeDone once it ended.
	store     statestore.StoreFileCapture
	storeDone bool
}

// partUpload is one part of a capture in steps, uploaded while the
// capture goes on; the checkpoint's upload then lists every part's file.
type partUpload struct {
	node   int
	id     int64
	full   bool
	last   bool // the capture's last part
	schema *arrow.Schema
	part   statestore.Part
}

// uploadedParts are the files of the parts of operator node's capture
// for checkpoint id uploaded so far, or why one failed (uploader only).
type uploadedParts struct {
	id    int64
	files []manifest.File
	err   error
	// packed is the capture's only part, small enough to go into the
	// checkpoint's packed object instead of its own (Checkpointing.Pack).
	packed *statepack.File
}

// upload is one checkpoint of the task waiting for its files to upload,
// or one part of a capture in flight (part).
type upload struct {
	part    *partUpload
	id      int64
	final   bool
	decline string      // the checkpoint failed at capture
	stages  []stagedTxn // sealed sink transactions to stage
	st      manifest.Subtask
	parts   []captured
	taken   time.Time // when the barrier was taken
}

// checkpointer is a task's checkpoint machinery.
type checkpointer struct {
	r       *runner
	cfg     *Checkpointing
	chains  map[int]*chain // by node index
	trigger chan int64

	// pending is the checkpoint whose state is being captured in steps
	// beside processing (statestore.SteppedSnapshotter), nil for none; it
	// goes to the queue once every capture is done.
	pending *upload
	queue   chan *upload
	done    chan struct{}
	// slots holds a token per part queued and not yet uploaded
	// (maxPartsInFlight); upParts is the uploader's record of them.
	slots   chan struct{}
	upParts map[int]*uploadedParts
	fatal   atomic.Pointer[error] // see failure
	closed  bool                  // queue closed (task goroutine only)
	// member is the task in its state group (Checkpointing.Pack), nil
	// when not packing or stateless; the uploader writes through it.
	member *statepack.Member
	// captureMem allocates the captured batches: those of a base can
	// hold hundreds of megabytes from the barrier to their upload, and
	// on the Go heap they would let it grow to twice that before the
	// collector ran. Mapped outside the heap, they are given back when
	// the uploader releases them. Small buffers come from the task's
	// allocator.
	captureMem *offheap.Allocator
}

func newCheckpointer(r *runner, trigger chan int64) *checkpointer {
	cfg := r.cfg.Checkpoints
	if cfg.MaxDeltas <= 0 {
		cfg.MaxDeltas = 64
	}
	c := &checkpointer{r: r, cfg: cfg, chains: map[int]*chain{}, trigger: trigger,
		queue: make(chan *upload, 64), done: make(chan struct{}),
		slots: make(chan struct{}, maxPartsInFlight), upParts: map[int]*uploadedParts{},
		captureMem: offheap.NewAllocator(r.mem)}
	if cfg.PartBytes <= 0 {
		cfg.PartBytes = DefaultPartBytes
	}
	for i, n := range r.cfg.Nodes {
		if _, ok := n.Op.(Stateful); ok {
			c.chains[i] = &chain{}
		}
	}
	if cfg.Pack != nil && len(c.chains) > 0 {
		c.member = cfg.Pack.Join()
	}
	go c.uploader()
	return c
}

// restore loads the state of every stateful node and the watermark.
func (c *checkpointer) restore(ctx context.Context) error {
	rs := c.cfg.Restore
	if rs == nil {
		return nil
	}
	r := c.r
	start := time.Now()
	kgStart, kgEnd := c.keyGroups()
	// Progress for the status: bytes of the state files restored so far,
	// counted file by file (a file is read whole).
	var total int64
	for _, n := range r.cfg.Nodes {
		if _, ok := n.Op.(Stateful); ok {
			for _, f := range rs.Files[n.Name] {
				total += f.Size
			}
		}
	}
	r.stats.restoreTotal.Store(total)
	for i, n := range r.cfg.Nodes {
		sf, ok := n.Op.(Stateful)
		if !ok {
			continue
		}
		state := sf.State()
		files, stores := SplitStoreFiles(rs.Files[n.Name])
		if len(stores) > 0 {
			kept, err := c.restoreStores(ctx, state, stores)
			if err != nil {
				return fmt.Errorf("restore %s[%d] from checkpoint %d: %w", n.Name, r.cfg.Subtask, rs.Checkpoint, err)
			}
			ch := c.chains[i]
			_, inStore := state.(statestore.StoreCapturer)
			ch.mu.Lock()
			switch storeChain(rs.Continue[n.Name], len(stores), inStore, kept) {
			case chainContinues:
				ch.setStore(stores[0])
			case chainShares:
				ch.shareStore(stores[kept], kgStart, kgEnd)
			}
			ch.mu.Unlock()
		}
		for _, f := range files {
			if err := RestoreStateFile(ctx, r.cfg.Bucket, state, f, kgStart, kgEnd, r.mem); err != nil {
				return fmt.Errorf("restore %s[%d] from checkpoint %d: %w", n.Name, r.cfg.Subtask, rs.Checkpoint, err)
			}
			r.stats.restoreRead.Add(f.Size)
		}
		if rs.Continue[n.Name] && len(files) > 0 {
			ch := c.chains[i]
			ch.files = append([]manifest.File(nil), files...)
			ch.baseBytes, ch.deltaB, ch.captured = chainSizes(files, kgStart)
			ch.capGen, ch.upGen = 1, 1
		}
	}
	r.stats.restoreTook.Store(int64(time.Since(start)))
	// Until its first checkpoint, the task's state is the chains it goes
	// on from (none where a rescale changed its key groups).
	_, size := c.chainFiles()
	r.stats.stateBytes.Store(size)
	if rs.Watermark != nil && *rs.Watermark > r.wm {
		wm := *rs.Watermark
		r.wm = wm
		r.stats.Watermark.Store(wm)
		for _, n := range r.cfg.Nodes {
			if n.Op != nil {
				if err := n.Op.ProcessWatermark(wm); err != nil {
					return fmt.Errorf("operator %s: restore watermark: %w", n.Name, err)
				}
			}
		}
	}
	return nil
}

// SplitStoreFiles parts an operator's files into the state files of its
// chain and its stores' files (manifest.KindStore), one list per store
// captured: per key group range, in the order first listed.
func SplitStoreFiles(all []manifest.File) (files []manifest.File, stores [][]manifest.File) {
	at := map[[2]int]int{}
	for _, f := range all {
		if f.Kind != manifest.KindStore {
			files = append(files, f)
			continue
		}
		r := [2]int{f.KeyGroupStart, f.KeyGroupEnd}
		i, ok := at[r]
		if !ok {
			i = len(stores)
			at[r] = i
			stores = append(stores, nil)
		}
		stores[i] = append(stores[i], f)
	}
	return files, stores
}

// DownloadStores downloads the files of each store (SplitStoreFiles) into
// a new directory under dir, each checked against its manifest entry as a
// state file is (a mismatch is ErrCorruptState), calling read with each
// file's size (from several goroutines at once). It downloads up to
// storeDownloads files at once, holding at most storeDownloadBytes of
// them: a store is tens to hundreds of files, and on S3 each costs a
// request's latency. The caller removes the directories, also after an
// error.
func DownloadStores(ctx context.Context, b blob.BucketReader, dir string, stores [][]manifest.File, read func(int64)) ([]statestore.CapturedStore, error) {
	var captured []statestore.CapturedStore
	type download struct {
		f   manifest.File
		dir string
	}
	var downloads []download
	for _, files := range stores {
		d, err := os.MkdirTemp(dir, "restore-")
		if err != nil {
			return captured, fmt.Errorf("store files: %w", err)
		}
		captured = append(captured, statestore.CapturedStore{Dir: d, KeyGroupStart: files[0].KeyGroupStart, KeyGroupEnd: files[0].KeyGroupEnd})
		for _, f := range files {
			downloads = append(downloads, download{f, d})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(storeDownloads)
	held := semaphore.NewWeighted(storeDownloadBytes)
	for _, d := range downloads {
		n := min(d.f.Size, storeDownloadBytes) // a larger file alone
		if held.Acquire(gctx, n) != nil {
			break // a download failed, or ctx ended
		}
		g.Go(func() error {
			defer held.Release(n)
			if err := downloadStoreFile(gctx, b, d.dir, d.f); err != nil {
				return err
			}
			if read != nil {
				read(d.f.Size)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return captured, err
	}
	return captured, ctx.Err()
}

// storeDownloads and storeDownloadBytes bound a restore's downloads of
// store files (DownloadStores).
var (
	storeDownloads           = storeDecoders
	storeDownloadBytes int64 = 64 << 20
)

// storeDecoders is how many store files storeDecoder decompresses at once.
const storeDecoders = 8

// downloadStoreFile downloads store file f into directory dir.
func downloadStoreFile(ctx context.Context, b blob.BucketReader, dir string, f manifest.File) error {
	data, err := statefile.Read(ctx, b, f)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if f.Compression == manifest.CompressZstd {
		if data, err = storeDecoder().DecodeAll(data, nil); err != nil {
			return fmt.Errorf("%w: store file %s: zstd: %w", ErrCorruptState, f.Segment(), err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, f.Name), data, 0o644); err != nil {
		return fmt.Errorf("store files: %w", err)
	}
	return nil
}

// What a restored operator's chain makes of the stores it was restored
// from (storeChain).
const (
	chainAnew      = iota // nothing: its first capture uploads its store whole
	chainContinues        // the store's files are the chain's (setStore)
	chainShares           // its store kept sstables of the one it was opened on (shareStore)
)

// storeChain decides what a restored operator's chain makes of the n
// stores it was restored from: whether it continues one subtask's chain
// over the same key groups (cont), whether its state is a store
// (inStore), and which store its own was opened on (kept, -1 for none;
// restoreStores). A chain continues on the one store's files when its
// state was restored on the heap from their rows (they stay its base) or
// its store was opened on them; a store made anew (a capture made before
// stores merged words: pebblestate.Restore writes its entries into new
// sstables, whose names may be the old ones') shares nothing, or its
// first capture would list old objects for new files of the same name.
func storeChain(cont bool, n int, inStore bool, kept int) int {
	switch {
	case cont && n == 1 && (!inStore || kept == 0):
		return chainContinues
	case inStore && kept >= 0:
		return chainShares
	}
	return chainAnew
}

// restoreStores restores an operator's state from the stores it was
// captured in: the stores in its place, or, for state that is not in a
// store, the stores' entries as rows.
func (c *checkpointer) restoreStores(ctx context.Context, state statestore.Snapshotter, stores [][]manifest.File) (kept int, err error) {
	sc, ok := state.(statestore.StoreCapturer)
	if !ok {
		kgStart, kgEnd := c.keyGroups()
		b, closeStores, err := OpenStores(ctx, c.r.cfg.Bucket, stores, kgStart, kgEnd)
		if err != nil {
			return -1, err
		}
		defer closeStores()
		recs, err := b.Snapshot(c.r.mem, true)
		if err != nil {
			return -1, err
		}
		defer func() {
			for _, rec := range recs {
				rec.Release()
			}
		}()
		for _, rec := range recs {
			if err := state.Restore(rec); err != nil {
				return -1, err
			}
		}
		return -1, nil
	}
	captured, err := DownloadStores(ctx, c.r.cfg.Bucket, sc.StoreScratch(), stores, func(n int64) { c.r.stats.restoreRead.Add(n) })
	defer func() {
		for _, s := range captured {
			_ = os.RemoveAll(s.Dir)
		}
	}()
	if err != nil {
		return -1, err
	}
	return sc.RestoreStores(captured)
}

// OpenStores downloads the stores a function operator's state was
// captured in (task.SplitStoreFiles) into a temporary directory and
// returns a backend over what they hold in key groups [start, end), as a
// worker restores them (pebblestate.Restore); its snapshots hold the
// tables' entries as rows. Its timers are in the operator's other state
// files (RestoreStateFile). close closes it and removes the directory.
// `weir state dump` and `export` read stores through it, and a restore
// into state that is not in a store (a savepoint of a job on pebble
// restored by one on the heap) copies its rows.
func OpenStores(ctx context.Context, b blob.BucketReader, stores [][]manifest.File, start, end int) (_ *statestore.Memory, close func(), err error) {
	dir, err := os.MkdirTemp("", "weir-open-stores-") // not weir-state-<n>: pebblestate.ProcessDir would take it for a process's
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	captured, err := DownloadStores(ctx, b, dir, stores, nil)
	if err != nil {
		return nil, nil, err
	}
	o := pebblestate.Options{Dir: dir}
	into, err := pebblestate.Open(o)
	if err != nil {
		return nil, nil, err
	}
	s, _, err := pebblestate.Restore(o, into, captured, start, end)
	if err != nil {
		_ = into.Close()
		return nil, nil, err
	}
	for _, c := range captured {
		_ = os.RemoveAll(c.Dir) // the store has its own links or copies
	}
	m := statestore.NewStored(start, end, s)
	return m, func() {
		m.Close()
		_ = s.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

// RestoreStateFile reads the state file f and restores the rows of key
// groups [kgStart, kgEnd) into state, as a restore after a failure or a
// rescale does: the file is checked against its manifest entry (a
// mismatch is ErrCorruptState) and decoded with state's schema (or one
// it reads, statestore.OlderSchemas), and its batches are applied in
// order. `weir state export` restores through it
// too, so that it reads a checkpoint exactly as a worker does.
func RestoreStateFile(ctx context.Context, b blob.BucketReader, state statestore.Snapshotter, f manifest.File, kgStart, kgEnd int, mem memory.Allocator) error {
	data, err := statefile.Read(ctx, b, f)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	want := state.Schema()
	older, ok := state.(statestore.OlderSchemas)
	if ok {
		want = nil // the state checks the schema itself
	}
	schema, batches, err := statefile.Decode(data, want, mem)
	if err != nil {
		return fmt.Errorf("%w: state file %s: %w", ErrCorruptState, f.Segment(), err)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	if older != nil {
		if err := older.CheckSchema(schema); err != nil {
			return fmt.Errorf("%w: state file %s: schema is not the operator's state schema: %w", ErrCorruptState, f.Segment(), err)
		}
	}
	kept := make([]arrow.RecordBatch, 0, len(batches))
	defer func() {
		for _, b := range kept {
			b.Release()
		}
	}()
	for _, rec := range batches {
		k, err := keepKeyGroups(rec, kgStart, kgEnd, mem)
		if err != nil {
			return fmt.Errorf("state file %s: %w", f.Segment(), err)
		}
		if k != nil {
			kept = append(kept, k)
		}
	}
	if s, ok := state.(statestore.RestoreSizer); ok && len(kept) > 0 {
		s.SizeRestore(kept)
	}
	for _, rec := range kept {
		if err := state.Restore(rec); err != nil {
			return fmt.Errorf("state file %s: %w", f.Segment(), err)
		}
	}
	return nil
}

// keepKeyGroups returns the rows of rec whose key group is in [start,
// end), nil if none; the caller releases the result. It works for any
// column type (arrowfmt.Filter).
func keepKeyGroups(rec arrow.RecordBatch, start, end int, mem memory.Allocator) (arrow.RecordBatch, error) {
	if rec.NumCols() == 0 || rec.Schema().Field(0).Name != StateKeyGroupField {
		return nil, fmt.Errorf("first column is not %s", StateKeyGroupField)
	}
	kg, ok := rec.Column(0).(*array.Int32)
	if !ok {
		return nil, fmt.Errorf("column %s is %s, not int32", StateKeyGroupField, rec.Column(0).DataType())
	}
	kept, err := arrowfmt.Filter(rec, nil, nil, func(i int) bool {
		g := int(kg.Value(i))
		return g >= start && g < end && !kg.IsNull(i)
	}, mem)
	if err != nil {
		return nil, fmt.Errorf("keep key groups [%d,%d): %w", start, end, err)
	}
	return kept, nil
}

// take snapshots the chain at barrier id and sends the barrier on: the
// source's position, every stateful operator's state (captured here,
// uploaded later), the sinks' pre-commits. align is how long alignment
// took and last the input whose barrier completed it ("" for a source).
func (c *checkpointer) take(id int64, align time.Duration, last string) error {
	r := c.r
	t0 := time.Now()
	// The previous capture must be complete first: the task stalls for
	// what is left of it, and this checkpoint counts the stall.
	if err := c.completePending(); err != nil {
		return err
	}
	st := c.subtask()
	st.Metrics.AlignMs = align.Milliseconds()
	st.Metrics.LastInput = last
	var decline []string
	if s := r.cfg.Source; s != nil {
		pos, err := c.sourcePosition()
		if err != nil {
			decline = append(decline, err.Error())
		} else {
			st.SourcePositions = map[string]json.RawMessage{s.Name: pos}
		}
	}
	u := &upload{id: id, taken: t0}
	for i, n := range r.cfg.Nodes {
		if sf, ok := n.Op.(Stateful); ok {
			full, gen := c.chains[i].capture(c.cfg.MaxDeltas)
			state := sf.State()
			p := captured{node: i, full: full, gen: gen, schema: state.Schema()}
			var err error
			if ss, ok := state.(statestore.SteppedSnapshotter); ok {
				p.capture, err = ss.BeginSnapshot(c.captureMem, full)
				if nc, ok := p.capture.(statestore.NarrowingCapture); ok && err == nil {
					p.schema = nc.FileSchema()
				}
				if pc, ok := p.capture.(statestore.PartedCapture); ok && err == nil {
					if h, ok := pc.(statestore.PartHolder); ok {
						p.holds = h.HoldsParts()
					}
					pc.SplitParts(c.cfg.PartBytes)
					if ec, ok := pc.(statestore.EncodingCapture); ok {
						ec.EncodeWith(c.cfg.Compression)
					}
					p.parted = true
				}
			} else {
				p.batches, err = state.Snapshot(c.captureMem, full)
			}
			if sc, ok := state.(statestore.StoreCapturer); ok && err == nil {
				p.store, err = sc.CaptureStore(id)
			}
			if err != nil {
				if p.capture != nil {
					p.capture.Release()
				}
				u.release()
				return fmt.Errorf("operator %s: snapshot %d: %w", n.Name, id, err)
			}
			u.parts = append(u.parts, p)
		}
	}
	txns, stages, err := c.preCommit(fmt.Sprintf("c%d", id))
	if err != nil {
		decline = append(decline, err.Error())
	}
	st.SinkTransactions = txns
	u.stages = stages
	if r.wm > MinWatermark {
		wm := r.wm
		st.Watermark = &wm
	}
	st.Metrics.SyncMs = time.Since(t0).Milliseconds()
	if err := r.control(exchange.Entry{Kind: exchange.KindBarrier, Value: id}); err != nil {
		u.release()
		return err
	}
	u.st = st
	if len(decline) > 0 {
		// The state captured is useless now: its chain must restart.
		for _, p := range u.parts {
			ch := c.chains[p.node]
			ch.mu.Lock()
			ch.broken, ch.failed = true, p.gen
			ch.mu.Unlock()
		}
		u.release()
		u.parts = nil
		u.decline = strings.Join(decline, "; ")
		return c.enqueue(u)
	}
	r.stats.Checkpoints.Add(1)
	for _, p := range u.parts {
		if p.capture != nil || p.store != nil {
			c.pending = u
			return nil
		}
	}
	u.st.Metrics.CaptureMs = u.st.Metrics.SyncMs
	return c.enqueue(u)
}

// A step of a capture in flight may take captureStep, or 1% of the time
// since the capture began if that is longer, up to maxCaptureStep: the
// longest the task stops for it between two batches. A task whose
// batches take long gives a capture little of its time in 5 ms steps
// (a 1M-key pebble capture then took 20-30 s); one that has gone on for
// a second gets 10 ms steps, and from 1.5 s on 15 ms (10-11 s; 25 ms
// made it 7-8 s but steps of 73-95 ms: docs/benchmarks.md).
const (
	captureStep    = 5 * time.Millisecond
	maxCaptureStep = 15 * time.Millisecond
)

// stepBudget is how long a step of a capture taken at taken may take now.
func stepBudget(taken, now time.Time) time.Duration {
	return min(max(captureStep, now.Sub(taken)/100), maxCaptureStep)
}

// step advances the capture in flight by one step (stepBudget), and
// queues its checkpoint for upload once it is complete. The task calls it
// between batches (tick).
func (c *checkpointer) step() error {
	if c.pending == nil {
		return nil
	}
	now := time.Now()
	return c.stepPending(now.Add(stepBudget(c.pending.taken, now)))
}

// completePending captures what is left of the capture in flight, at
// once.
func (c *checkpointer) completePending() error {
	if c.pending == nil {
		return nil
	}
	return c.stepPending(time.Time{})
}

func (c *checkpointer) stepPending(deadline time.Time) error {
	u := c.pending
	t0 := time.Now()
	m := &u.st.Metrics
	defer func() {
		// Once queued, the uploader owns u. Completing a capture at once
		// (a barrier, the end of the input) is not a step beside
		// processing: the next checkpoint's sync counts it.
		if c.pending == u && !deadline.IsZero() {
			m.StepMs = max(m.StepMs, time.Since(t0).Milliseconds())
		}
	}()
	fail := func(p *captured, err error) error {
		c.pending = nil
		u.release()
		return fmt.Errorf("operator %s: snapshot %d: %w", c.r.cfg.Nodes[p.node].Name, u.id, err)
	}
	for i := range u.parts {
		p := &u.parts[i]
		if p.capture != nil {
			var done bool
			var err error
			if p.parted {
				done, err = c.stepParts(u, p, deadline)
			} else {
				done, err = p.capture.Step(deadline)
			}
			if err != nil {
				return fail(p, err)
			}
			if !done {
				return nil
			}
			p.batches = p.capture.Batches()
			if cc, ok := p.capture.(statestore.CopyingCapture); ok {
				c.r.stats.noteCopies(cc.Copies())
			}
			p.capture.Release()
			p.capture = nil
		}
		if p.store != nil && !p.storeDone {
			// The store's capture ends once its flush has (a zero
			// deadline waits for it): a look, not a step.
			done, err := p.store.Poll(deadline.IsZero())
			if err != nil {
				return fail(p, err)
			}
			if !done {
				return nil
			}
			p.storeDone = true
		}
	}
	c.pending = nil
	if !deadline.IsZero() {
		m.StepMs = max(m.StepMs, time.Since(t0).Milliseconds())
	}
	m.CaptureMs = time.Since(u.taken).Milliseconds()
	return c.enqueue(u)
}

// completeSlice is how long a capture in parts completed at once runs
// between two looks at its parts: its memory is the parts it writes in
// that time beyond the part size.
const completeSlice = 20 * time.Millisecond

// stepParts advances a capture in parts by one step and queues the parts
// it ended for upload. While maxPartsInFlight parts wait for the
// uploader, a step beside processing does nothing (the capture waits for
// the uploads rather than hold more in memory) unless the capture holds
// its parts (statestore.PartHolder: it goes on, and the parts wait in
// held for a slot), and a capture done in
// such a step is done for the task once a later step has queued its last
// parts (waiting for the uploader there stalled the task for an upload);
// completing at once (a zero deadline) waits for them, a slice at a time.
func (c *checkpointer) stepParts(u *upload, p *captured, deadline time.Time) (bool, error) {
	pc := p.capture.(statestore.PartedCapture)
	for {
		if !c.queueParts(u, p, deadline.IsZero()) && (!p.holds || deadline.IsZero()) {
			// Uploads behind: no capture now (a capture that holds its
			// parts goes on beside processing). Waiting ends only with
			// the task.
			return false, c.r.ctx.Err()
		}
		d := deadline
		if d.IsZero() {
			d = time.Now().Add(completeSlice)
		}
		done, err := p.capture.Step(d)
		if err != nil {
			return false, err
		}
		p.held = append(p.held, pc.TakeParts()...)
		if done {
			if !c.queueParts(u, p, deadline.IsZero()) {
				return false, c.r.ctx.Err()
			}
			return true, nil
		}
		if !deadline.IsZero() {
			return false, nil
		}
	}
}

// queueParts queues p's held parts for upload as slots free up, waiting
// for them if wait, and reports whether none is held any more. The part
// after which the capture is done is its last.
func (c *checkpointer) queueParts(u *upload, p *captured, wait bool) bool {
	for len(p.held) > 0 {
		if wait {
			select {
			case c.slots <- struct{}{}:
			case <-c.r.ctx.Done():
				return false
			}
		} else {
			select {
			case c.slots <- struct{}{}:
			default:
				return false
			}
		}
		pu := &partUpload{node: p.node, id: u.id, full: p.full, schema: p.schema, part: p.held[0]}
		_, end := c.keyGroups()
		pu.last = pu.part.KeyGroupEnd == end
		p.held = p.held[1:]
		if err := c.enqueue(&upload{part: pu}); err != nil {
			releaseParts([]statestore.Part{pu.part})
			<-c.slots
			return false
		}
	}
	return true
}

// keyGroups is the subtask's key groups, [start, end).
func (c *checkpointer) keyGroups() (start, end int) {
	return arrowfmt.KeyGroupRange(c.r.cfg.Subtask, c.r.cfg.MaxParallelism, c.r.cfg.Parallelism)
}

func releaseParts(parts []statestore.Part) {
	for _, p := range parts {
		for _, b := range p.Batches {
			b.Release()
		}
	}
}

func (c *checkpointer) enqueue(u *upload) error {
	select {
	case c.queue <- u:
		return nil
	case <-c.r.ctx.Done():
		u.release()
		return c.r.ctx.Err()
	}
}

// final pre-commits what the sinks hold at the end of the input and
// acknowledges it with Final, then waits until every ack is out.
func (c *checkpointer) final() error {
	if err := c.completePending(); err != nil {
		return err
	}
	txns, stages, err := c.preCommit("final")
	if err != nil {
		return err
	}
	st := c.subtask()
	st.SinkTransactions = txns
	// The position at the end and the last watermark: while the rest of
	// the job runs on, its checkpoints record this subtask as finished
	// with them (a source of splits restored at another parallelism
	// must find its splits at their end, not start them over).
	if s := c.r.cfg.Source; s != nil {
		pos, err := c.sourcePosition()
		if err != nil {
			return fmt.Errorf("final acknowledgement: %w", err)
		}
		st.SourcePositions = map[string]json.RawMessage{s.Name: pos}
	}
	if wm := c.r.wm; wm > MinWatermark {
		st.Watermark = &wm
	}
	if err := c.enqueue(&upload{final: true, st: st, stages: stages}); err != nil {
		return err
	}
	c.closeQueue()
	select {
	case <-c.done:
		return c.failure()
	case <-c.r.ctx.Done():
		return c.r.ctx.Err()
	}
}

// close drops a capture in flight and stops the uploader (after final, a
// no-op).
func (c *checkpointer) close() {
	if c.pending != nil {
		c.pending.release()
		c.pending = nil
	}
	c.closeQueue()
	<-c.done
}

func (c *checkpointer) closeQueue() {
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
}

func (c *checkpointer) subtask() manifest.Subtask {
	r := c.r
	st := manifest.Subtask{Index: r.cfg.Subtask}
	if len(c.chains) > 0 {
		st.KeyGroupStart, st.KeyGroupEnd = c.keyGroups()
	}
	return st
}

func (c *checkpointer) sourcePosition() (json.RawMessage, error) {
	s := c.r.cfg.Source
	rs, ok := s.Source.(Resumable)
	if !ok {
		return nil, fmt.Errorf("source %s cannot record its position, so checkpoints cannot include it", s.Name)
	}
	pos, err := rs.Position()
	if err != nil {
		return nil, fmt.Errorf("source %s: position: %w", s.Name, err)
	}
	sc := sourceCheckpoint{Position: pos, DeadLetters: c.r.stats.Counters.DeadLetters.Load()}
	if c.r.maxTs > MinWatermark {
		m := c.r.maxTs
		sc.MaxTimestamp = &m
	}
	return json.Marshal(sc)
}

// mergeSplits merges the checkpointed positions of a split source's old
// subtasks, each {"position": {"splits": {...}}, "maxTimestamp": ...,
// "deadLetters": n}, into one that every new subtask restores: all the
// splits (each was owned, so recorded, by one old subtask), the lowest
// largest event time (no record is judged later than it was), and the
// dead-letter count on the first subtask only, so the job's total goes on.
// At the same parallelism (own >= 0: the index in old of the subtask's own
// position) the event time and count are the subtask's own.
func mergeSplits(old []json.RawMessage, first bool, own int) (json.RawMessage, error) {
	splits := map[string]json.RawMessage{}
	var out sourceCheckpoint
	for i, raw := range old {
		var sc sourceCheckpoint
		if err := json.Unmarshal(raw, &sc); err != nil {
			return nil, fmt.Errorf("position %d: %w", i, err)
		}
		var p struct {
			Splits map[string]json.RawMessage `json:"splits"`
		}
		if err := json.Unmarshal(sc.Position, &p); err != nil || p.Splits == nil {
			return nil, fmt.Errorf("position %d %.200s: want {\"splits\": {...}}, the position of a source of splits", i, sc.Position)
		}
		for id, pos := range p.Splits {
			if _, dup := splits[id]; dup {
				return nil, fmt.Errorf("split %q is in the positions of two subtasks", id)
			}
			splits[id] = pos
		}
		switch {
		case own >= 0:
			if i == own {
				out.MaxTimestamp, out.DeadLetters = sc.MaxTimestamp, sc.DeadLetters
			}
			continue
		case sc.MaxTimestamp != nil && (out.MaxTimestamp == nil || *sc.MaxTimestamp < *out.MaxTimestamp):
			ts := *sc.MaxTimestamp
			out.MaxTimestamp = &ts
		}
		if first {
			out.DeadLetters += sc.DeadLetters
		}
	}
	pos, err := json.Marshal(map[string]any{"splits": splits})
	if err != nil {
		return nil, err
	}
	out.Position = pos
	return json.Marshal(out)
}

// allSplits reports whether every position in old is a split position:
// one taken before its source had splits is not.
func allSplits(old []json.RawMessage) bool {
	for _, raw := range old {
		var sc struct {
			Position struct {
				Splits map[string]json.RawMessage `json:"splits"`
			} `json:"position"`
		}
		if json.Unmarshal(raw, &sc) != nil || sc.Position.Splits == nil {
			return false
		}
	}
	return true
}

// restoreSource hands the source its recorded position, before it opens.
func (c *checkpointer) restoreSource() error {
	rs := c.cfg.Restore
	s := c.r.cfg.Source
	if rs == nil || s == nil {
		return nil
	}
	if rs.SourcePosition == nil {
		return fmt.Errorf("restore %s[%d]: checkpoint %d has no position for it", s.Name, c.r.cfg.Subtask, rs.Checkpoint)
	}
	var sc sourceCheckpoint
	if err := json.Unmarshal(rs.SourcePosition, &sc); err != nil || sc.Position == nil {
		return fmt.Errorf("restore %s[%d]: checkpoint %d: position %.200s: want {\"position\": ..., \"maxTimestamp\": ...}", s.Name, c.r.cfg.Subtask, rs.Checkpoint, rs.SourcePosition)
	}
	res, ok := s.Source.(Resumable)
	if !ok {
		return fmt.Errorf("restore %s[%d]: the source cannot resume from a position", s.Name, c.r.cfg.Subtask)
	}
	if err := res.Restore(sc.Position); err != nil {
		return fmt.Errorf("restore %s[%d]: %w", s.Name, c.r.cfg.Subtask, err)
	}
	if sc.MaxTimestamp != nil {
		c.r.maxTs = *sc.MaxTimestamp
	}
	c.r.stats.Counters.DeadLetters.Store(sc.DeadLetters)
	return nil
}

// preCommit pre-commits every transactional sink of the chain, and the
// source's dead letters since the last barrier: a StagedSink is only
// sealed here, its upload (stages) left to the uploader; another sink
// pre-commits at once (txns).
func (c *checkpointer) preCommit(suffix string) (txns []manifest.Txn, stages []stagedTxn, err error) {
	r := c.r
	for _, n := range r.cfg.Nodes {
		if n.Sink == nil {
			continue
		}
		tp, ok := AsTwoPhase(n.Sink)
		if !ok {
			continue
		}
		if txns, stages, err = c.preCommitSink(n.Name, tp, suffix, txns, stages); err != nil {
			return txns, stages, err
		}
	}
	if d := r.dead; d != nil && d.txn != nil {
		// A transaction only when there are letters: most checkpoints
		// have none.
		some, err := d.writePending(r.ctx, r.mem)
		if err != nil {
			return txns, stages, err
		}
		if some {
			return c.preCommitSink(d.source, d.txn, suffix, txns, stages)
		}
	}
	return txns, stages, nil
}

// preCommitSink pre-commits (or seals) the transaction of one sink, named
// name in the manifest, and appends it to txns or stages.
func (c *checkpointer) preCommitSink(name string, tp TwoPhaseSink, suffix string, txns []manifest.Txn, stages []stagedTxn) ([]manifest.Txn, []stagedTxn, error) {
	r := c.r
	id := fmt.Sprintf("%s-a%d-%s-s%d-%s", r.cfg.Job, r.cfg.Attempt, name, r.cfg.Subtask, suffix)
	if ss, ok := tp.(StagedSink); ok {
		stage, err := ss.Seal(id)
		if err != nil {
			return txns, stages, fmt.Errorf("sink %s: seal %s: %w", name, id, err)
		}
		return txns, append(stages, stagedTxn{sink: name, id: id, stage: stage}), nil
	}
	h, err := tp.PreCommit(r.ctx, id)
	if err != nil {
		return txns, stages, fmt.Errorf("sink %s: pre-commit %s: %w", name, id, err)
	}
	return append(txns, manifest.Txn{Sink: name, ID: id, Handle: h}), stages, nil
}

// stagedTxn is a sealed sink transaction the uploader stages.
type stagedTxn struct {
	sink, id string
	stage    func(context.Context) (json.RawMessage, error)
}

// stageTimeout is how long the uploader retries staging a sealed
// transaction (the store may be away for a while) before the task fails.
const stageTimeout = 2 * time.Minute

// runStage stages one sealed transaction, retrying with backoff.
func (c *checkpointer) runStage(s stagedTxn) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(c.r.ctx, stageTimeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		h, err := s.stage(ctx)
		if err == nil {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sink %s: stage %s: %w", s.sink, s.id, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// failure is the error that must fail the task: a sealed sink
// transaction could not be staged, so its output would be lost.
func (c *checkpointer) failure() error {
	if p := c.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

func (u *upload) release() {
	for i := range u.parts {
		p := &u.parts[i]
		if p.capture != nil {
			p.capture.Release()
			p.capture = nil
		}
		for _, b := range p.batches {
			b.Release()
		}
		p.batches = nil
		releaseParts(p.held)
		p.held = nil
		if p.store != nil {
			_ = p.store.Release() // only its directory of links: the store's files stay
			p.store = nil
		}
	}
}

// uploader writes captured state files in checkpoint order and
// acknowledges each checkpoint once its files are in the bucket.
func (c *checkpointer) uploader() {
	defer close(c.done)
	if c.member != nil {
		defer c.member.Leave()
	}
	for u := range c.queue {
		if u.part != nil {
			c.uploadPart(u.part)
			<-c.slots
			continue
		}
		if c.r.ctx.Err() != nil {
			u.release()
			continue
		}
		t0 := time.Now()
		st := u.st
		var err error
		// Sealed sink output is staged even for a declined checkpoint:
		// its transaction commits with a later one.
		for _, s := range u.stages {
			h, serr := c.runStage(s)
			if serr != nil {
				c.fatal.CompareAndSwap(nil, &serr)
				err = serr
				continue
			}
			st.SinkTransactions = append(st.SinkTransactions, manifest.Txn{Sink: s.sink, ID: s.id, Handle: h})
		}
		switch {
		case err != nil:
			c.reportNoFiles(u)
		case u.decline != "":
			err = errors.New(u.decline)
			c.reportNoFiles(u)
		default:
			err = c.uploadParts(u, &st)
		}
		u.release()
		ack := Ack{Checkpoint: u.id, Final: u.final, Subtask: st}
		if err != nil {
			ack.Decline = err.Error()
			ack.Subtask.State = nil
		}
		ack.Subtask.Metrics.AsyncMs = time.Since(t0).Milliseconds()
		c.cfg.Ack(ack)
	}
}

// reportNoFiles tells the task's state group that it writes no files
// for checkpoint u (it failed before its upload), so that the worker's
// other tasks' files do not wait for its.
func (c *checkpointer) reportNoFiles(u *upload) {
	if c.member != nil && !u.final {
		_, _ = c.member.Write(c.r.ctx, u.id, nil)
	}
}

// uploadPart uploads one part of a capture in flight as its own state
// file, and records it for the checkpoint's upload. A part without rows
// is not uploaded, unless it is the last and no part before it was.
func (c *checkpointer) uploadPart(p *partUpload) {
	defer releaseParts([]statestore.Part{p.part})
	up := c.upParts[p.node]
	if up == nil || up.id != p.id {
		up = &uploadedParts{id: p.id}
		c.upParts[p.node] = up
	}
	if up.err != nil || c.r.ctx.Err() != nil {
		return
	}
	start, end := p.part.KeyGroupStart, p.part.KeyGroupEnd
	if len(p.part.Batches) == 0 && len(p.part.Encoded) == 0 {
		if !p.last || len(up.files) > 0 {
			return
		}
		start, _ = c.keyGroups()
	}
	f, buf, err := c.encodeFile(c.r.cfg.Nodes[p.node].Name, p.id, kindOf(p.full), p.schema, p.part.Batches, p.part.Encoded, start, end)
	if err != nil {
		up.err = err
		return
	}
	defer buf.Release()
	if c.member != nil && p.last && len(up.files) == 0 && buf.Len() <= MaxPackedFile {
		// The whole capture in one small part: packed with the
		// checkpoint's other files.
		up.packed = &statepack.File{Entry: f, Data: buf.Bytes()}
		return
	}
	if err := c.putBuffer(f.Key, buf); err != nil {
		up.err = err
		return
	}
	up.files = append(up.files, f)
}

// chainSizes returns the bytes of the base and of the deltas of a chain
// of a subtask's own files (key groups from kgStart on), and how many
// deltas it has: a capture in parts is several files, the first of which
// starts at kgStart.
func chainSizes(files []manifest.File, kgStart int) (base, deltas int64, n int) {
	for _, f := range files {
		if f.Kind == manifest.KindBase {
			base += f.Size
			continue
		}
		deltas += f.Size
		if f.KeyGroupStart == kgStart {
			n++
		}
	}
	return base, deltas, n
}

func kindOf(full bool) string {
	if full {
		return manifest.KindBase
	}
	return manifest.KindDelta
}

func (c *checkpointer) uploadParts(u *upload, st *manifest.Subtask) error {
	r := c.r
	kgStart, kgEnd := c.keyGroups()
	// Each operator's files of this checkpoint: uploaded already (parts),
	// uploaded now, or packed with the worker's other tasks' below.
	type result struct {
		skip  bool // nothing to add to its chain
		files []manifest.File
		err   error
		// store is the files of the operator's store's capture
		// (captured.store), shared and new, with new bytes of them.
		store    []manifest.File
		newBytes int64
	}
	results := make([]result, len(u.parts))
	var packed []statepack.File
	type owner struct {
		i     int  // the result the packed file belongs to
		store bool // a file of its store's capture
	}
	var owners []owner
	pack := func(i int, f statepack.File) {
		packed = append(packed, f)
		owners = append(owners, owner{i, f.Entry.Kind == manifest.KindStore})
	}
	var errs []error
	for i, p := range u.parts {
		ch := c.chains[p.node]
		n := r.cfg.Nodes[p.node]
		ch.mu.Lock()
		stale := !p.full && (p.gen != ch.upGen || p.gen == ch.failed)
		ch.mu.Unlock()
		up := c.upParts[p.node]
		delete(c.upParts, p.node)
		if stale {
			results[i].skip = true
			errs = append(errs, fmt.Errorf("operator %s: an earlier state upload failed; the next checkpoint takes a base", n.Name))
			continue
		}
		res := &results[i]
		switch {
		case !p.parted:
			f, buf, err := c.encodeFile(n.Name, u.id, kindOf(p.full), p.schema, p.batches, nil, kgStart, kgEnd)
			switch {
			case err != nil:
				res.err = err
			case c.member != nil && buf.Len() <= MaxPackedFile:
				pack(i, statepack.File{Entry: f, Data: buf.Bytes()})
			default:
				res.err = c.putBuffer(f.Key, buf)
				res.files = []manifest.File{f}
			}
			if buf != nil {
				buf.Release()
			}
		case up == nil || up.id != u.id:
			res.err = fmt.Errorf("the parts of snapshot %d were not uploaded", u.id)
		default:
			res.files, res.err = up.files, up.err
			if up.packed != nil && up.err == nil {
				pack(i, *up.packed)
			}
		}
		if p.store != nil && res.err == nil {
			var small []statepack.File
			res.store, small, res.newBytes, res.err = c.uploadStore(u.id, n.Name, ch, p.store)
			for _, f := range small {
				pack(i, f)
			}
		}
	}
	if c.member != nil {
		// Every checkpoint is reported, with files or none, so that the
		// other tasks' files do not wait for ours.
		entries, err := c.member.Write(r.ctx, u.id, packed)
		for j, o := range owners {
			switch res := &results[o.i]; {
			case err != nil:
				res.err = err
			case o.store:
				res.store = append(res.store, entries[j])
			default:
				res.files = append(res.files, entries[j])
			}
		}
	}
	for i, p := range u.parts {
		res := results[i]
		if res.skip {
			continue
		}
		ch := c.chains[p.node]
		n := r.cfg.Nodes[p.node]
		var size int64
		for _, f := range res.files {
			size += f.Size
		}
		ch.mu.Lock()
		if res.err != nil {
			ch.broken, ch.failed = true, p.gen
			ch.mu.Unlock()
			errs = append(errs, fmt.Errorf("operator %s: %w", n.Name, res.err))
			continue
		}
		if p.full {
			ch.files = res.files
			ch.baseBytes, ch.deltaB, ch.upGen = size, 0, p.gen
			if p.store == nil {
				// A base of state not in a store is the whole state:
				// the files of a store it was restored from (a
				// savepoint resumed on the heap) are no longer part of
				// it, and restored under the base they would bring back
				// what is gone since.
				ch.store, ch.uploaded = nil, nil
			}
		} else {
			ch.files = append(ch.files, res.files...)
			ch.deltaB += size
		}
		st.Metrics.UploadedBytes += size
		if p.store != nil {
			ch.setStore(res.store)
			st.Metrics.UploadedBytes += res.newBytes
		}
		ch.mu.Unlock()
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The acknowledged state is every chain as it stands after this
	// checkpoint's uploads, in node order.
	var size int64
	st.State, size = c.chainFiles()
	r.stats.stateBytes.Store(size)
	return nil
}

// chainFiles returns the files of every operator's chain in node order,
// and their bytes: the state a checkpoint acknowledges, or after a
// restore, the state the task goes on from.
func (c *checkpointer) chainFiles() (files []manifest.File, size int64) {
	for i := range c.r.cfg.Nodes {
		if ch := c.chains[i]; ch != nil {
			ch.mu.Lock()
			files = append(files, ch.files...)
			files = append(files, ch.store...)
			ch.mu.Unlock()
		}
	}
	for _, f := range files {
		size += f.Size
	}
	return files, size
}

// setStore records the files of the operator's store as uploaded
// (ch.mu held). Only the immutable ones are ever listed again.
func (ch *chain) setStore(files []manifest.File) {
	ch.store = files
	ch.uploaded = make(map[string]manifest.File, len(files))
	for _, f := range files {
		ch.uploaded[f.Name] = f
	}
}

// shareStore records the files of a store that the operator's store was
// opened on at a rescale (statestore.StoreCapturer.RestoreStores), as
// its own over key groups [kgStart, kgEnd), so that its first capture
// lists the sstables it kept under the keys they were uploaded to, as
// later captures do (ch.mu held). Nothing is listed until that capture.
// A listed sstable may hold key groups that are no longer the store's:
// its database's MANIFEST excludes them.
func (ch *chain) shareStore(files []manifest.File, kgStart, kgEnd int) {
	ch.uploaded = make(map[string]manifest.File, len(files))
	for _, f := range files {
		f.KeyGroupStart, f.KeyGroupEnd = kgStart, kgEnd
		ch.uploaded[f.Name] = f
	}
}

// uploadStore uploads the files of a capture of operator op's store that
// are not in the bucket yet, each its own object, and returns the
// capture's files as the manifest lists them: the immutable ones uploaded
// before under their keys, the new ones, and how many bytes are new. The
// small files that change with every capture (a database's MANIFEST) go
// into small, to be packed with the worker's other files when the task
// packs. A file is read whole before its upload.
func (c *checkpointer) uploadStore(id int64, op string, ch *chain, capture statestore.StoreFileCapture) (files []manifest.File, small []statepack.File, newBytes int64, err error) {
	r := c.r
	kgStart, kgEnd := c.keyGroups()
	ch.mu.Lock()
	uploaded := ch.uploaded
	ch.mu.Unlock()
	for _, sf := range capture.Files() {
		// An empty file (pebble's markers, named for what they mark) is
		// immutable too: its own object, uploaded once. Packed, it would
		// share its offset with the next file.
		immutable := sf.Immutable || sf.Size == 0
		if f, ok := uploaded[sf.Name]; ok && immutable {
			files = append(files, f)
			continue
		}
		data, err := os.ReadFile(filepath.Join(capture.Dir(), sf.Name))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("store file: %w", err)
		}
		var compression string
		if c.cfg.Compression != arrowfmt.CompressNone && len(data) > 0 {
			// zstd whatever the job's codec of Arrow buffers: a store
			// file is one stream of bytes, compressed whole. Kept as it
			// is when that saves less than a tenth.
			if z := storeEncoder().EncodeAll(data, nil); len(z) < len(data)-len(data)/10 {
				data, compression = z, manifest.CompressZstd
			}
		}
		sum := sha256.Sum256(data)
		f := manifest.File{
			Key:  layout.StoreFileKey(r.cfg.Job, op, kgStart, kgEnd, id, r.cfg.Attempt, sf.Name),
			Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Kind: manifest.KindStore,
			Operator: op, KeyGroupStart: kgStart, KeyGroupEnd: kgEnd, Name: sf.Name, Compression: compression,
		}
		newBytes += f.Size
		if !immutable && c.member != nil && len(data) <= MaxPackedFile {
			small = append(small, statepack.File{Entry: f, Data: data})
			continue
		}
		if err := c.put(f.Key, data); err != nil {
			return nil, nil, 0, err
		}
		files = append(files, f)
	}
	return files, small, newBytes, nil
}

// storeEncoder and storeDecoder compress and decompress store files; both
// are safe for concurrent use (EncodeAll, DecodeAll) and made once. The
// fastest level: a checkpoint compresses every new sstable on the
// uploader's goroutine, beside processing.
var (
	storeEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err) // only for bad options
		}
		return e
	})
	storeDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(storeDecoders), zstd.WithDecoderMaxMemory(maxStoreFile))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// maxStoreFile bounds a store file decompressed at a restore: pebble's
// files are at most a few hundred MiB.
const maxStoreFile = 1 << 30

// encodeFile encodes batches, the rows of key groups [kgStart, kgEnd), as
// one Arrow IPC state file, named for its own object, into a buffer
// outside the Go heap that the caller releases: a large base's file is
// hundreds of megabytes, which a slice would hold twice over as it
// doubled, in a heap that the collector lets grow to twice that again.
//
// Its int64 and timestamp_ms columns are narrowed (arrowfmt.NarrowSchema):
// to what schema says, a capture's FileSchema (statestore.NarrowingCapture,
// whose copies were encoded in it), or else, with every batch at hand, to
// the range of their values.
func (c *checkpointer) encodeFile(op string, id int64, kind string, schema *arrow.Schema, batches []arrow.RecordBatch, encoded []arrowfmt.EncodedBatch, kgStart, kgEnd int) (manifest.File, *offheap.Buffer, error) {
	r := c.r
	if len(encoded) == 0 && !arrowfmt.Narrowed(schema) && arrowfmt.FileWritable(schema, batches) == nil {
		schema = arrowfmt.NarrowToFit(schema, batches)
	}
	key := layout.StateFileKey(r.cfg.Job, op, kgStart, kgEnd, id, r.cfg.Attempt, kind)
	buf := new(offheap.Buffer)
	f, err := statefile.EncodeTo(&yieldingWriter{w: buf}, manifest.File{Key: key, Kind: kind, Operator: op, KeyGroupStart: kgStart, KeyGroupEnd: kgEnd}, schema, batches, encoded, r.mem, c.cfg.Compression)
	if err != nil {
		buf.Release()
		return f, nil, err
	}
	return f, buf, nil
}

// yieldEvery is how many bytes of a state file the uploader encodes
// between two yields of its processor (runtime.Gosched), about a
// millisecond of compressing and hashing. With more busy goroutines than
// cores (the state benchmark: two source tasks, two window tasks and
// their uploaders on two), a task the scheduler preempts waits for the
// time slices of the others, up to 10 ms each; a capture step that ran
// into such a wait took 30-56 ms instead of its 5-15. An uploader that
// yields no longer makes a task wait for its slice (docs/benchmarks.md).
const yieldEvery = 256 << 10

// yieldingWriter is the uploader's writer of a state file: it yields its
// processor every yieldEvery bytes, so that a task waiting for one runs
// within about a millisecond.
type yieldingWriter struct {
	w     io.Writer
	n     int
	yield func() // runtime.Gosched when nil; tests count the yields
}

func (y *yieldingWriter) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	if y.n += n; y.n >= yieldEvery {
		y.n = 0
		if y.yield != nil {
			y.yield()
		} else {
			runtime.Gosched()
		}
	}
	return n, err
}

// putBuffer uploads an encoded state file from its buffer as its own
// object.
func (c *checkpointer) putBuffer(key string, buf *offheap.Buffer) error {
	if err := blob.PutReader(c.r.ctx, c.r.cfg.Bucket, key, buf.Reader(), buf.Len()); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

// put uploads an encoded state file as its own object.
func (c *checkpointer) put(key string, data []byte) error {
	if err := c.r.cfg.Bucket.Put(c.r.ctx, key, data); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}
