package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go.uber.org/goleak"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// noCoordinator is an address nothing listens on, so that client commands
// fall back to the store instead of finding a coordinator of the machine.
const noCoordinator = "http://127.0.0.1:1"

// checkpointSpec runs about 2s (4,000 rides at 2,000/s) with a checkpoint
// every 200ms: a keyed tumbling window (typed key columns in its state), a
// function with keyed state (the binary key encoding) and a files sink
// (transactions).
const checkpointSpec = `
job: ck
parallelism: 2
checkpoint: {interval: 200ms, retain: 3}
sources:
  - name: rides
    type: datagen
    count: 4000
    rate: 2000
    schema: {ride_id: int64, zone: string, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 5s}
    datagen:
      seed: 7
      eventsPerSecond: 20
      fields:
        zone: {values: [north, south, east, west]}
        fare: {min: 2, max: 90}
operators:
  - name: stats
    input: rides
    keyBy: [zone]
    window: {type: tumbling, size: 1m}
    aggregate: {requests: count(), avg_fare: avg(fare)}
  - name: surge
    input: stats
    keyBy: [zone]
    function: surge-multiplier
sinks:
  - {name: out, input: surge, type: files, path: output/surge/, format: jsonl}
`

// execWeir runs the weir command in this process.
func execWeir(args ...string) (stdout, stderr string, code int) {
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--coordinator") }) {
		args = append(args, "--coordinator", noCoordinator)
	}
	args = append(args, "--log-level", "warn")
	var out, errb bytes.Buffer
	code = Execute(args, &out, &errb)
	return out.String(), errb.String(), code
}

// weir runs a command that must succeed.
func weir(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, code := execWeir(args...)
	if code != 0 {
		t.Fatalf("weir %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

// weirFails runs a command that must fail and returns its stderr.
func weirFails(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := execWeir(args...)
	if code == 0 {
		t.Fatalf("weir %s: exit 0, want a failure\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
	}
	return stderr
}

// fixture is one run of checkpointSpec, shared by the tests: they only read
// it (a test that damages it copies it first).
var fixture struct {
	once  sync.Once
	root  string
	store string // the store directory
	job   string
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// Every goroutine a test started (coordinators, workers, clients)
		// must have ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if fixture.root != "" {
		_ = os.RemoveAll(fixture.root)
	}
	os.Exit(code)
}

// checkpointedJob returns the store directory and job id of the fixture,
// running the job the first time.
func checkpointedJob(t *testing.T) (store, job string) {
	t.Helper()
	fixture.once.Do(func() {
		root, err := os.MkdirTemp("", "weir-cli-checkpoints-")
		if err != nil {
			fixture.err = err
			return
		}
		fixture.root, fixture.store = root, filepath.Join(root, "store")
		specFile := filepath.Join(root, "job.yaml")
		if err := os.WriteFile(specFile, []byte(checkpointSpec), 0o644); err != nil {
			fixture.err = err
			return
		}
		stdout, stderr, code := execWeir("run", specFile, "--store", "file://"+fixture.store)
		if code != 0 || !strings.Contains(stdout, "FINISHED") {
			fixture.err = fmt.Errorf("weir run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			return
		}
		jobs, err := os.ReadDir(filepath.Join(fixture.store, "jobs"))
		if err != nil || len(jobs) != 1 {
			fixture.err = fmt.Errorf("want one job in the store, got %v (%v)", jobs, err)
			return
		}
		fixture.job = jobs[0].Name()
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.store, fixture.job
}

// copyStore copies the fixture's store for a test that damages it.
func copyStore(t *testing.T) (store, job string) {
	t.Helper()
	src, job := checkpointedJob(t)
	store = filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(store, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return store, job
}

// manifests returns the decoded manifests of the job, newest first.
func manifests(t *testing.T, store, job string) []*manifest.Manifest {
	t.Helper()
	dir := filepath.Join(store, "jobs", job, "checkpoints")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*manifest.Manifest
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *manifest.Manifest) int { return int(b.Checkpoint - a.Checkpoint) })
	if len(ms) == 0 {
		t.Fatal("the job left no checkpoint")
	}
	return ms
}

// opFiles returns the state files of an operator in a manifest, each once,
// in manifest order.
func opFiles(m *manifest.Manifest, op string) []manifest.File {
	var fs []manifest.File
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			for _, f := range s.State {
				if f.Operator == op && !slices.ContainsFunc(fs, func(g manifest.File) bool { return g.Segment() == f.Segment() }) {
					fs = append(fs, f)
				}
			}
		}
	}
	return fs
}

// stateCheckpoint returns the newest manifest with state of the window
// operator, stats.
func stateCheckpoint(t *testing.T, store, job string) *manifest.Manifest {
	t.Helper()
	return stateOf(t, store, job, "stats")
}

// stateOf returns the newest manifest with state of op, nil if none.
func stateOf(t *testing.T, store, job, op string) *manifest.Manifest {
	t.Helper()
	for _, m := range manifests(t, store, job) {
		if len(opFiles(m, op)) > 0 {
			return m
		}
	}
	if op == "stats" {
		t.Fatal("no retained checkpoint holds state of the window operator stats")
	}
	return nil
}

// countRows reads state files with arrow-go alone and counts their rows,
// and those for which match (if set) holds.
// fileBytes reads state file f from the store directory as any tool can:
// the object, or for a packed file its Size bytes from Offset.
func fileBytes(t *testing.T, store string, f manifest.File) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, filepath.FromSlash(f.Key)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Packed {
		if f.Offset+f.Size > int64(len(data)) {
			t.Fatalf("%s: the object has %d bytes", f.Segment(), len(data))
		}
		data = data[f.Offset : f.Offset+f.Size]
	}
	return data
}

func countRows(t *testing.T, store string, files []manifest.File, match func(rec arrow.RecordBatch, row int) bool) (total, matched int) {
	t.Helper()
	for _, f := range files {
		data := fileBytes(t, store, f)
		rd, err := ipc.NewFileReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		for i := range rd.NumRecords() {
			rec, err := rd.RecordBatch(i)
			if err != nil {
				t.Fatalf("%s: batch %d: %v", f.Key, i, err)
			}
			total += int(rec.NumRows())
			if match == nil {
				continue
			}
			for r := range int(rec.NumRows()) {
				if match(rec, r) {
					matched++
				}
			}
		}
		rd.Close()
	}
	return total, matched
}

func TestCheckpointsListFromStore(t *testing.T) {
	store, job := checkpointedJob(t)
	ms := manifests(t, store, job)
	stdout, stderr := weir(t, "checkpoints", "list", job, "--store", "file://"+store)
	if !strings.Contains(stderr, "reading the checkpoints of "+job+" from") {
		t.Errorf("stderr does not say it fell back to the store:\n%s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"ID", "STATUS", "TRIGGERED", "DURATION", "SIZE", "STATE", "ACKS", "RETAINED", "REASON"}) {
		t.Errorf("header %q", lines[0])
	}
	if len(lines) != len(ms)+1 {
		t.Fatalf("%d rows for %d manifests:\n%s", len(lines)-1, len(ms), stdout)
	}
	for i, m := range ms { // newest first
		f := strings.Fields(lines[i+1])
		if f[0] != strconv.FormatInt(m.Checkpoint, 10) || !slices.Contains(f, "COMPLETED") {
			t.Errorf("row %d: %q, want checkpoint %d COMPLETED", i, lines[i+1], m.Checkpoint)
		}
		tasks := 0
		for _, v := range m.Vertices {
			tasks += v.Parallelism
		}
		if acks := fmt.Sprintf("%d/%d", tasks, tasks); !slices.Contains(f, acks) {
			t.Errorf("row %d: %q, want acks %s", i, lines[i+1], acks)
		}
		if !slices.Contains(f, "yes") {
			t.Errorf("row %d: %q, want RETAINED yes: its manifest is in the store", i, lines[i+1])
		}
	}

	stdout, _ = weir(t, "checkpoints", "list", job, "--store", "file://"+store, "-o", "json")
	var list []coordinator.CheckpointInfo
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if n := strings.Count(stdout, `"retained": true`); n != len(ms) {
		t.Errorf("-o json: %d checkpoints with \"retained\": true, want %d\n%s", n, len(ms), stdout)
	}
	if len(list) != len(ms) {
		t.Fatalf("-o json: %d checkpoints, want %d", len(list), len(ms))
	}
	for i, m := range ms {
		var state, uploaded int64
		for _, v := range m.Vertices {
			for _, s := range v.Subtasks {
				uploaded += s.Metrics.UploadedBytes
				for _, f := range s.State {
					state += f.Size
				}
			}
		}
		c := list[i]
		if c.ID != m.Checkpoint || c.Status != coordinator.CheckpointCompleted || c.StateSize != state || c.Bytes != uploaded ||
			c.Final != m.Final || !c.Triggered.Equal(m.Triggered) || c.Attempt != m.Attempt {
			t.Errorf("checkpoint %d: %+v; manifest: state %d, uploaded %d, final %v", m.Checkpoint, c, state, uploaded, m.Final)
		}
	}
}

func TestCheckpointsListFromCoordinator(t *testing.T) {
	store, job := checkpointedJob(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	history := []coordinator.CheckpointInfo{
		{ID: 12, Attempt: 2, Status: coordinator.CheckpointInProgress, Triggered: t0.Add(2 * time.Second), Acks: 3, Tasks: 6},
		{ID: 11, Attempt: 2, Status: coordinator.CheckpointFailed, Triggered: t0.Add(time.Second), Acks: 5, Tasks: 6, Reason: "timed out\nafter 10s"},
		{ID: 10, Attempt: 2, Status: coordinator.CheckpointCompleted, Triggered: t0, Duration: 0.25, Bytes: 1536, StateSize: 3 << 20, Acks: 6, Tasks: 6},
	}
	var knowsFixture atomic.Bool // with no history, as after a restart
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/{id}/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == job && knowsFixture.Load() {
			_, _ = w.Write([]byte("[]"))
			return
		}
		if r.PathValue("id") != "known" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(coordinator.APIError{Error: "job " + r.PathValue("id") + " not found"})
			return
		}
		_ = json.NewEncoder(w).Encode(history)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The store of the config file (not --store, which would skip the
	// coordinator) marks retention; it has no job "known".
	config := storeConfig(t, "file://"+store)
	stdout, stderr := weir(t, "checkpoints", "list", "known", "--coordinator", srv.URL, "--config", config)
	if !strings.Contains(stderr, "retention unknown: no job known in") {
		t.Errorf("stderr does not say why retention is unknown: %s", stderr)
	}
	for _, want := range []string{"IN_PROGRESS", "3/6", "FAILED", "timed out after 10s", "COMPLETED", "250ms", "1.5 KiB", "3.0 MiB", "6/6", " ? "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "12 ") || !strings.HasPrefix(lines[3], "10 ") {
		t.Errorf("want the coordinator's order, newest first:\n%s", stdout)
	}
	stdout, _ = weir(t, "checkpoints", "list", "known", "--coordinator", srv.URL, "-o", "json")
	var got []coordinator.CheckpointInfo
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 3 || got[1].Reason != history[1].Reason {
		t.Errorf("-o json: %v %+v", err, got)
	}
	if strings.Contains(stdout, `"retained"`) {
		t.Errorf("-o json: retention is unknown, yet:\n%s", stdout)
	}

	// A coordinator that does not know the job: the store answers.
	stdout, stderr = weir(t, "checkpoints", "list", job, "--coordinator", srv.URL, "--config", config)
	if !strings.Contains(stderr, "not found") || !strings.Contains(stdout, "COMPLETED") {
		t.Errorf("unknown job: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// A coordinator that knows the job but has no history of it.
	knowsFixture.Store(true)
	stdout, stderr = weir(t, "checkpoints", "list", job, "--coordinator", srv.URL, "--config", config)
	if !strings.Contains(stderr, "no checkpoint history") || !strings.Contains(stdout, "COMPLETED") {
		t.Errorf("no history: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// Nowhere.
	stderr = weirFails(t, "checkpoints", "list", "nosuch-00000000", "--store", "file://"+store)
	if !strings.Contains(stderr, "no job nosuch-00000000") {
		t.Errorf("unknown job everywhere: %s", stderr)
	}
}

// storeConfig writes a config file that sets the store, for commands
// that must find it without --store (which they take as "read only the
// store").
func storeConfig(t *testing.T, storeURL string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(file, []byte("store: "+storeURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestCheckpointsListRetained checks the RETAINED column against the
// fixture's store: a coordinator's checkpoint is retained while its
// manifest is there, a savepoint always; --store or WEIR_STORE reads the
// store alone; an unreadable store leaves retention unknown, and says why.
func TestCheckpointsListRetained(t *testing.T) {
	store, job := checkpointedJob(t)
	ms := manifests(t, store, job)
	inStore := map[int64]bool{}
	for _, m := range ms {
		inStore[m.Checkpoint] = true
	}
	removed := int64(1) // a checkpoint retention removed
	for inStore[removed] {
		removed++
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newest := ms[0].Checkpoint
	history := []coordinator.CheckpointInfo{
		{ID: newest + 2, Status: coordinator.CheckpointInProgress, Triggered: t0.Add(3 * time.Second)},
		{ID: newest + 1, Status: coordinator.CheckpointCompleted, Savepoint: true, Triggered: t0.Add(2 * time.Second)},
		{ID: newest, Status: coordinator.CheckpointCompleted, Triggered: t0.Add(time.Second)},
		{ID: removed, Status: coordinator.CheckpointCompleted, Triggered: t0},
	}
	want := map[int64]bool{newest + 2: false, newest + 1: true, newest: true, removed: false}
	var asked atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/{id}/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		_ = json.NewEncoder(w).Encode(history)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	config := storeConfig(t, "file://"+store)

	stdout, stderr := weir(t, "checkpoints", "list", job, "--coordinator", srv.URL, "--config", config)
	if stderr != "" {
		t.Errorf("stderr: %s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(history)+1 {
		t.Fatalf("want the coordinator's %d checkpoints:\n%s", len(history), stdout)
	}
	for i, c := range history {
		f := strings.Fields(lines[i+1])
		yes := map[bool]string{true: "yes", false: "no"}[want[c.ID]]
		if f[0] != strconv.FormatInt(c.ID, 10) || !slices.Contains(f, yes) {
			t.Errorf("row %q: want checkpoint %d RETAINED %s", lines[i+1], c.ID, yes)
		}
	}
	stdout, _ = weir(t, "checkpoints", "list", job, "--coordinator", srv.URL, "--config", config, "-o", "json")
	var rows []struct {
		ID       int64 `json:"id"`
		Retained *bool `json:"retained"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != len(history) {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	for _, r := range rows {
		if r.Retained == nil || *r.Retained != want[r.ID] {
			t.Errorf("-o json: checkpoint %d retained %v, want %v", r.ID, r.Retained, want[r.ID])
		}
	}

	// A store that cannot be read: the coordinator's list, retention "?".
	missing := storeConfig(t, "file://"+filepath.Join(t.TempDir(), "nosuch"))
	stdout, stderr = weir(t, "checkpoints", "list", job, "--coordinator", srv.URL, "--config", missing)
	if !strings.Contains(stderr, "weir: retention unknown: open store") || strings.Count(stdout, " ? ") != len(history) {
		t.Errorf("unreadable store: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}

	// --store, or WEIR_STORE: the store alone, and stderr says so.
	before := asked.Load()
	stdout, stderr = weir(t, "checkpoints", "list", job, "--coordinator", srv.URL, "--store", "file://"+store)
	t.Setenv("WEIR_STORE", "file://"+store)
	envOut, envErr := weir(t, "checkpoints", "list", job, "--coordinator", srv.URL)
	if asked.Load() != before {
		t.Errorf("with --store or WEIR_STORE the coordinator was asked")
	}
	for _, out := range []struct{ stdout, stderr string }{{stdout, stderr}, {envOut, envErr}} {
		if !strings.Contains(out.stderr, "--store given: reading the checkpoints of "+job+" from") {
			t.Errorf("stderr does not say it read the store alone:\n%s", out.stderr)
		}
		lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
		if len(lines) != len(ms)+1 || strings.Count(out.stdout, " yes ") != len(ms) || strings.Contains(out.stdout, "IN_PROGRESS") {
			t.Errorf("want the store's %d manifests, each retained:\n%s", len(ms), out.stdout)
		}
	}
}

func TestCheckpointsInspect(t *testing.T) {
	store, job := checkpointedJob(t)
	m := stateCheckpoint(t, store, job)
	n := strconv.FormatInt(m.Checkpoint, 10)
	stdout, _ := weir(t, "checkpoints", "inspect", job, n, "--store", "file://"+store)
	want := []string{"checkpoint " + n + " of job " + job, layout.ManifestKey(job, m.Checkpoint), "vertex stats", "vertex surge", "[0, 64)", "source positions", "rides: "}
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			for _, f := range s.State {
				want = append(want, f.Key)
			}
			for _, tx := range s.SinkTransactions {
				want = append(want, tx.ID)
			}
			if s.Watermark != nil {
				want = append(want, "watermark "+strconv.FormatInt(*s.Watermark, 10))
			}
		}
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	if strings.Contains(stdout, "staged") || !strings.Contains(stdout, "committed") {
		t.Errorf("the job finished: every transaction is committed:\n%s", stdout)
	}

	stdout, _ = weir(t, "checkpoints", "inspect", job, n, "--store", "file://"+store, "-o", "json")
	got, err := manifest.Decode([]byte(stdout))
	if err != nil {
		t.Fatalf("-o json does not decode as a manifest: %v\n%s", err, stdout)
	}
	if got.Checkpoint != m.Checkpoint || !slices.Equal(got.Files(), m.Files()) {
		t.Errorf("-o json: checkpoint %d with files %v, want %d with %v", got.Checkpoint, got.Files(), m.Checkpoint, m.Files())
	}

	stderr := weirFails(t, "checkpoints", "inspect", job, "999999", "--store", "file://"+store)
	if !strings.Contains(stderr, layout.ManifestKey(job, 999999)) || !strings.Contains(stderr, "retained checkpoints: ") {
		t.Errorf("missing checkpoint: %s", stderr)
	}
	if stderr := weirFails(t, "checkpoints", "inspect", job, "x1", "--store", "file://"+store); !strings.Contains(stderr, `checkpoint "x1"`) {
		t.Errorf("bad id: %s", stderr)
	}
}

func TestStateDump(t *testing.T) {
	store, job := checkpointedJob(t)
	for _, op := range []string{"stats", "surge"} {
		t.Run(op, func(t *testing.T) {
			m := stateOf(t, store, job, op)
			if m == nil {
				t.Fatalf("no retained checkpoint holds state of operator %s", op)
			}
			n := strconv.FormatInt(m.Checkpoint, 10)
			files := opFiles(m, op)
			// The key "north", as each state holds it: the zone column of the
			// window state, the arrowfmt encoding in the function state.
			north := string(arrowfmt.AppendKey(nil, "north"))
			total, matched := countRows(t, store, files, func(rec arrow.RecordBatch, r int) bool {
				if idx := rec.Schema().FieldIndices("zone"); len(idx) == 1 { // stats: key_group, zone, kind, ...
					c := rec.Column(idx[0]).(*array.String)
					return !c.IsNull(r) && c.Value(r) == "north"
				}
				c := rec.Column(rec.Schema().FieldIndices("key")[0]).(*array.Binary) // surge: key_group, table, key, ...
				return string(c.Value(r)) == north
			})
			if total == 0 || matched == 0 {
				t.Fatalf("the files of %s hold %d rows, %d of north: want some", op, total, matched)
			}

			stdout, stderr := weir(t, "state", "dump", job, n, "--operator", op, "--store", "file://"+store)
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if len(lines)-1 != total {
				t.Errorf("table: %d rows, the files hold %d:\n%s", len(lines)-1, total, stdout)
			}
			if f := strings.Fields(lines[0]); len(f) < 2 || f[0] != "_file" || f[1] != "key_group" {
				t.Errorf("header %q", lines[0])
			}
			if !strings.Contains(stderr, fmt.Sprintf("%d rows from %d of %d state files", total, len(files), len(files))) {
				t.Errorf("stderr: %s", stderr)
			}

			stdout, _ = weir(t, "state", "dump", job, n, "--operator", op, "--store", "file://"+store, "-o", "json")
			rows := jsonLines(t, stdout)
			if len(rows) != total {
				t.Errorf("json: %d rows, the files hold %d", len(rows), total)
			}
			if op == "stats" {
				// A window state's kind is a code in the files; the dump
				// names it.
				for _, r := range rows {
					if k := r["kind"]; k != "replace" && k != "window" && k != "clear" {
						t.Fatalf("json: kind %v in row %v, want replace, window or clear", k, r)
					}
				}
			}
			var order []string // files in the order rows came
			for _, r := range rows {
				if f, _ := r["_file"].(string); len(order) == 0 || order[len(order)-1] != f {
					order = append(order, f)
				}
			}
			var apply []string
			for _, f := range files {
				apply = append(apply, f.Segment())
			}
			if !isSubsequence(order, apply) {
				t.Errorf("rows come from %v, want the apply order %v", order, apply)
			}

			stdout, _ = weir(t, "state", "dump", job, n, "--operator", op, "--key", "north", "--store", "file://"+store, "-o", "json")
			rows = jsonLines(t, stdout)
			if len(rows) != matched {
				t.Errorf("--key north: %d rows, want %d:\n%s", len(rows), matched, stdout)
			}
			keyCol := map[string]string{"stats": "zone", "surge": "key"}[op]
			for _, r := range rows {
				if r[keyCol] != "north" {
					t.Errorf("--key north: row %v", r)
				}
			}
			stdout, _ = weir(t, "state", "dump", job, n, "--operator", op, "--key", "north", "--store", "file://"+store, "-o", "table")
			if got := len(strings.Split(strings.TrimSpace(stdout), "\n")) - 1; got != matched {
				t.Errorf("--key north -o table: %d rows, want %d:\n%s", got, matched, stdout)
			}
			stdout, _ = weir(t, "state", "dump", job, n, "--operator", op, "--limit", "1", "--store", "file://"+store, "-o", "json")
			if rows := jsonLines(t, stdout); len(rows) != 1 {
				t.Errorf("--limit 1: %d rows", len(rows))
			}
		})
	}
	n := strconv.FormatInt(stateCheckpoint(t, store, job).Checkpoint, 10)
	stderr := weirFails(t, "state", "dump", job, n, "--operator", "nosuch", "--store", "file://"+store)
	if !strings.Contains(stderr, `no state of operator "nosuch"`) || !strings.Contains(stderr, "stats") {
		t.Errorf("unknown operator: %s", stderr)
	}
	if stderr := weirFails(t, "state", "dump", job, n, "--store", "file://"+store); !strings.Contains(stderr, "operator") {
		t.Errorf("no --operator: %s", stderr)
	}
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows
}

// isSubsequence reports whether sub appears in seq in order.
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

// TestStateFileIsArrowIPC reads a state file with arrow-go's IPC file
// reader only: any Arrow implementation reads checkpoints.
func TestStateFileIsArrowIPC(t *testing.T) {
	store, job := checkpointedJob(t)
	m := stateCheckpoint(t, store, job)
	f := opFiles(m, "stats")[0]
	if !f.Packed {
		t.Errorf("%s is not packed into its worker's object", f.Key)
	}
	rd, err := ipc.NewFileReader(bytes.NewReader(fileBytes(t, store, f)))
	if err != nil {
		t.Fatalf("%s is not an Arrow IPC file: %v", f.Key, err)
	}
	defer rd.Close()
	if name := rd.Schema().Field(0).Name; name != "key_group" {
		t.Errorf("first field %q, want key_group (schema %s)", name, rd.Schema())
	}
	rows := 0
	for i := range rd.NumRecords() {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
	}
	if rows == 0 {
		t.Errorf("%s: no rows", f.Key)
	}
}

func TestCorruptManifest(t *testing.T) {
	store, job := copyStore(t)
	m := stateCheckpoint(t, store, job)
	key := layout.ManifestKey(job, m.Checkpoint)
	path := filepath.Join(store, filepath.FromSlash(key))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	n := strconv.FormatInt(m.Checkpoint, 10)
	stderr := weirFails(t, "checkpoints", "inspect", job, n, "--store", "file://"+store)
	if !strings.Contains(stderr, key) || !strings.Contains(stderr, "corrupt") {
		t.Errorf("inspect of a truncated manifest: %s", stderr)
	}
	stderr = weirFails(t, "state", "dump", job, n, "--operator", "stats", "--store", "file://"+store)
	if !strings.Contains(stderr, key) {
		t.Errorf("state dump with a truncated manifest: %s", stderr)
	}
	// The list shows it CORRUPT, with the error, and goes on.
	stdout, _ := weir(t, "checkpoints", "list", job, "--store", "file://"+store)
	var row string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, n+" ") {
			row = l
		}
	}
	if !strings.Contains(row, "CORRUPT") || !strings.Contains(row, "truncated") {
		t.Errorf("list row of checkpoint %s: %q\n%s", n, row, stdout)
	}
	if strings.Count(stdout, "COMPLETED") != len(manifests(t, fixture.store, job))-1 {
		t.Errorf("the other checkpoints should stay COMPLETED:\n%s", stdout)
	}
}

func TestStateDumpDamagedFile(t *testing.T) {
	store, job := copyStore(t)
	m := stateCheckpoint(t, store, job)
	f := opFiles(m, "stats")[len(opFiles(m, "stats"))-1]
	path := filepath.Join(store, filepath.FromSlash(f.Key))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The middle byte of the file, which may be one of several in its
	// object.
	data[f.Offset+f.Size/2] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	stderr := weirFails(t, "state", "dump", job, strconv.FormatInt(m.Checkpoint, 10), "--operator", "stats", "--store", "file://"+store)
	if !strings.Contains(stderr, f.Segment()) || !strings.Contains(stderr, "SHA-256") {
		t.Errorf("state dump of a damaged file: %s", stderr)
	}
	if err := os.WriteFile(path, data[:f.Offset+f.Size-1], 0o644); err != nil {
		t.Fatal(err)
	}
	stderr = weirFails(t, "state", "dump", job, strconv.FormatInt(m.Checkpoint, 10), "--operator", "stats", "--store", "file://"+store)
	// The object ends a byte into the file: it, or a file after it in
	// the object that the dump reads first, is short.
	if !strings.Contains(stderr, f.Key) || !strings.Contains(stderr, "bytes, the manifest says") {
		t.Errorf("state dump of a truncated file: %s", stderr)
	}
}

func TestTxnListFiles(t *testing.T) {
	store, job := copyStore(t)
	ms := manifests(t, store, job)
	stdout, _ := weir(t, "txn", "list", job, "--store", "file://"+store)
	var ids []string
	for _, m := range ms {
		for _, v := range m.Vertices {
			for _, s := range v.Subtasks {
				for _, tx := range s.SinkTransactions {
					ids = append(ids, tx.ID)
				}
			}
		}
	}
	if len(ids) == 0 {
		t.Fatal("no sink transactions in the retained manifests")
	}
	for _, id := range ids {
		if !strings.Contains(stdout, id) {
			t.Errorf("output lacks transaction %s:\n%s", id, stdout)
		}
	}
	if strings.Count(stdout, "committed") != len(slices.Compact(slices.Sorted(slices.Values(ids)))) {
		t.Errorf("the job finished: want every transaction committed:\n%s", stdout)
	}

	// Stage one object of a committed transaction again (pending), and
	// one of a transaction no manifest lists (orphan).
	var pending manifest.Txn
	var listedBy []string // checkpoints whose manifests list it, ascending
	var checkpoint int64  // one of them
	for _, m := range slices.Backward(ms) {
		for _, v := range m.Vertices {
			for _, s := range v.Subtasks {
				for _, tx := range s.SinkTransactions {
					if pending.ID == "" && strings.Contains(string(tx.Handle), `"staged"`) {
						pending = tx
					}
					if pending.ID != "" && tx.ID == pending.ID {
						listedBy, checkpoint = append(listedBy, strconv.FormatInt(m.Checkpoint, 10)), m.Checkpoint
					}
				}
			}
		}
	}
	if pending.ID == "" {
		t.Fatal("no transaction with output in the retained manifests")
	}
	var h struct {
		Objects []struct{ Staged, Final string }
	}
	if err := json.Unmarshal(pending.Handle, &h); err != nil {
		t.Fatal(err)
	}
	restage := func(from, to string) {
		data, err := os.ReadFile(filepath.Join(store, filepath.FromSlash(from)))
		if err != nil {
			t.Fatal(err)
		}
		to = filepath.Join(store, filepath.FromSlash(to))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	restage(h.Objects[0].Final, h.Objects[0].Staged)
	restage(h.Objects[0].Final, "output/surge/_staging/lost-txn-1/part-0.jsonl")

	stdout, _ = weir(t, "txn", "list", job, "--store", "file://"+store)
	wantRows := [][]string{{"out", pending.ID, strings.Join(listedBy, ","), "pending"}, {"out", "lost-txn-1", "-", "orphan"}}
	for _, want := range wantRows {
		found := false
		for _, l := range strings.Split(stdout, "\n") {
			found = found || slices.Equal(strings.Fields(l), want)
		}
		if !found {
			t.Errorf("no row %v:\n%s", want, stdout)
		}
	}
	stdout, _ = weir(t, "txn", "list", job, "--store", "file://"+store, "-o", "json")
	var rows []txnRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	states := map[string]string{}
	for _, r := range rows {
		states[r.ID] = r.State
	}
	if states[pending.ID] != txnPending || states["lost-txn-1"] != txnOrphan || len(rows) != len(slices.Compact(slices.Sorted(slices.Values(ids))))+1 {
		t.Errorf("-o json: %+v", rows)
	}

	stdout, _ = weir(t, "checkpoints", "inspect", job, strconv.FormatInt(checkpoint, 10), "--store", "file://"+store)
	if !strings.Contains(stdout, "staged") {
		t.Errorf("inspect: the restaged transaction %s should show as staged:\n%s", pending.ID, stdout)
	}
}

func TestTxnListRedis(t *testing.T) {
	r := testenv.StartRedis(t)
	store := t.TempDir()
	job := "rj-0a1b2c3d"
	specJSON := `{"job": "rj", "sources": [{"name": "in", "type": "datagen", "schema": {"n": "int64"}}],
		"sinks": [{"name": "events", "input": "in", "type": "redis", "stream": "ev"}]}`
	handle := func(txn string, rows int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"v":1,"stream":"ev","txn":%q,"rows":%d}`, txn, rows))
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &manifest.Manifest{Version: manifest.Version, Job: job, Checkpoint: 4, Attempt: 1, Triggered: t0, Completed: t0.Add(time.Second),
		MaxParallelism: 128, SpecSHA256: strings.Repeat("ab", 32),
		Vertices: []manifest.Vertex{{Name: "in", Parallelism: 1, Subtasks: []manifest.Subtask{{Index: 0,
			SinkTransactions: []manifest.Txn{
				{Sink: "events", ID: "t-done", Handle: handle("t-done", 2)},
				{Sink: "events", ID: "t-staged", Handle: handle("t-staged", 3)},
				{Sink: "events", ID: "t-empty", Handle: handle("t-empty", 0)},
				{Sink: "events", ID: "t-gone", Handle: handle("t-gone", 1)},
			}}}}}}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for key, content := range map[string][]byte{layout.SpecKey(job): []byte(specJSON), layout.ManifestKey(job, 4): data} {
		p := filepath.Join(store, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	ctx := context.Background()
	for _, err := range []error{
		rc.Set(ctx, "weir:txn:{ev}:done:t-done", "1", time.Hour).Err(),
		rc.RPush(ctx, "weir:txn:{ev}:t-staged", "a", "b", "c").Err(),
		rc.RPush(ctx, "weir:txn:{ev}:t-lost", "x").Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	states := func(args ...string) map[string]string {
		t.Helper()
		stdout, _ := weir(t, append([]string{"txn", "list", job, "--store", "file://" + store, "-o", "json"}, args...)...)
		var rows []txnRow
		if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		got := map[string]string{}
		for _, r := range rows {
			if r.Sink != "events" || r.Type != "redis" {
				t.Errorf("row %+v", r)
			}
			got[r.ID] = r.State
		}
		return got
	}
	want := map[string]string{"t-done": txnCommitted, "t-staged": txnPending, "t-empty": txnCommitted, "t-gone": txnUnknown, "t-lost": txnOrphan}
	if got := states("--redis-addr", r.Addr); !maps.Equal(got, want) {
		t.Errorf("with --redis-addr: %v, want %v", got, want)
	}
	want = map[string]string{"t-done": txnUnknown, "t-staged": txnUnknown, "t-empty": txnCommitted, "t-gone": txnUnknown}
	if got := states(); !maps.Equal(got, want) {
		t.Errorf("without --redis-addr: %v, want %v", got, want)
	}
	stdout, _ := weir(t, "checkpoints", "inspect", job, "4", "--store", "file://"+store, "--redis-addr", r.Addr)
	for _, l := range []string{"t-done", "t-staged", "t-gone"} {
		want := map[string]string{"t-done": "committed", "t-staged": "staged", "t-gone": "unknown"}[l]
		found := false
		for _, line := range strings.Split(stdout, "\n") {
			f := strings.Fields(line)
			found = found || (len(f) == 3 && f[1] == l && f[2] == want)
		}
		if !found {
			t.Errorf("inspect: no line %s %s:\n%s", l, want, stdout)
		}
	}
}
