package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// exportSpec keeps every event in state until its input ends: a one-day
// window per user (the events span 6 s), the sequence checker's counter
// per k, and a regular join that keeps every row of both sides. So the
// state of each operator in a checkpoint is a function of which events
// the source had read at the barrier, which the manifest's source
// positions say.
const exportSpec = `
job: ex
parallelism: 2
checkpoint: {interval: 100ms, retain: 30}
sources:
  - name: rides
    type: datagen
    count: 6000
    rate: 3000
    schema: {ride_id: int64, user: int64, fare: float64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 5s}
    datagen:
      seed: 3
      eventsPerSecond: 1000
      fields:
        user: {min: 0, max: 299}
        fare: {min: 1, max: 50}
operators:
  - name: per_user
    input: rides
    keyBy: [user]
    window: {type: tumbling, size: 1d}
    aggregate: {n: count(), total: sum(fare)}
  - name: keyed
    input: rides
    select: {k: "ride_id % 40", seq: ride_id}
  - name: seqcheck
    input: keyed
    keyBy: [k]
    function: sequence-check
    config: {stride: 40}
  - {name: evens, input: rides, filter: "ride_id % 2 == 0"}
  - {name: odds, input: rides, filter: "ride_id % 2 == 1"}
  - {name: oddkeys, input: odds, select: {k: "ride_id - 1", ride_id: ride_id}}
  - name: pairs
    join:
      type: regular
      left: {input: evens, keyBy: [ride_id]}
      right: {input: oddkeys, keyBy: [k]}
      columns: {a: left.ride_id, b: right.ride_id}
sinks:
  - {name: users-out, input: per_user, type: blackhole}
  - {name: seq-out, input: seqcheck, type: blackhole}
  - {name: pairs-out, input: pairs, type: blackhole}
`

// TestStateExport exports each operator's state from a checkpoint that
// holds bases and deltas, and from the same files listed as a rescale to
// 3 lists them, and compares it with the state recomputed from the events
// the checkpoint's source positions say were read.
func TestStateExport(t *testing.T) {
	t.Run("memory", func(t *testing.T) { stateExport(t, exportSpec) })
	// The window's, the function's and the join's state written by the
	// pebble backend.
	t.Run("pebble", func(t *testing.T) { stateExport(t, exportSpec+"state: {backend: pebble, memory: 4MiB}\n") })
}

func stateExport(t *testing.T, jobSpec string) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	specFile := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specFile, []byte(jobSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, _ := weir(t, "run", specFile, "--store", "file://"+store); !strings.Contains(stdout, "FINISHED") {
		t.Fatalf("weir run: %s", stdout)
	}
	jobs, err := os.ReadDir(filepath.Join(store, "jobs"))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs in the store: %v %v", jobs, err)
	}
	job := jobs[0].Name()
	js, err := spec.Parse([]byte(jobSpec), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ops := []string{"per_user", "seqcheck", "pairs"}
	// The newest checkpoint whose state of every operator has a delta
	// (the export must apply them), taken before the source had read
	// everything (the positions must matter).
	var m *manifest.Manifest
	var read []row
	for _, c := range manifests(t, store, job) {
		ok := !c.Final
		for _, op := range ops {
			ok = ok && slices.ContainsFunc(opFiles(c, op), func(f manifest.File) bool { return f.Kind == manifest.KindDelta })
		}
		if !ok {
			continue
		}
		if read = readEvents(t, js, c); len(read) > 0 && len(read) < 6000 {
			m = c
			break
		}
	}
	if m == nil {
		t.Fatal("no retained checkpoint has deltas of every operator and some of the events read")
	}
	t.Logf("checkpoint %d: %d events read", m.Checkpoint, len(read))
	if strings.Contains(jobSpec, "backend: pebble") {
		// The window's, the function's and the join's state are their
		// stores'.
		for _, op := range []string{"per_user", "seqcheck", "pairs"} {
			if !slices.ContainsFunc(opFiles(m, op), func(f manifest.File) bool { return f.Kind == manifest.KindStore }) {
				t.Errorf("checkpoint %d lists no file of %s's stores", m.Checkpoint, op)
			}
		}
	}

	check := func(t *testing.T, n int64) {
		for _, op := range ops {
			var got [2][]map[string]any
			for i, format := range []string{"parquet", "arrow"} {
				file := filepath.Join(dir, fmt.Sprintf("%s-%d.%s", op, n, format))
				_, stderr := weir(t, "state", "export", job, strconv.FormatInt(n, 10), "--operator", op, "--file", file, "--store", "file://"+store)
				got[i] = readExport(t, file, format)
				if want := fmt.Sprintf("weir: %d rows of operator %s", len(got[i]), op); !strings.Contains(stderr, want) {
					t.Errorf("%s %s: stderr %q, want %q", op, format, stderr, want)
				}
			}
			// Rows come in key group order; within a group, in the
			// state's own order, which two restores need not share.
			for i := range got {
				slices.SortFunc(got[i], func(a, b row) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			}
			if a, b := fmt.Sprint(got[0]), fmt.Sprint(got[1]); a != b {
				t.Errorf("%s: parquet and arrow files differ: %d and %d rows, first:\n%v\n%v", op, len(got[0]), len(got[1]), got[0][0], got[1][0])
			}
			if err := checkExport(op, got[0], read); err != nil {
				t.Errorf("checkpoint %d, operator %s: %v", n, op, err)
			}
			if strings.Contains(jobSpec, "backend: pebble") {
				// Its tables are in stores captured as files: the dump
				// prints each store's entries (a window's and a join's
				// as the heap operator's rows), one row per exported row.
				stdout, _ := weir(t, "state", "dump", job, strconv.FormatInt(n, 10), "--operator", op, "-o", "json", "--store", "file://"+store)
				entries := 0
				for line := range strings.Lines(stdout) {
					var r map[string]any
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						t.Fatalf("dump: %v: %q", err, line)
					}
					f, _ := r["_file"].(string)
					window := op == "per_user" && r["user"] != nil && r["window_start"] != nil
					joined := op == "pairs" && r["entry"] == "row"
					if strings.HasPrefix(f, "store ") && (r["table"] == "n" || window || joined) {
						entries++
					}
				}
				if entries != len(got[0]) {
					t.Errorf("checkpoint %d: the dump prints %d entries of the stores, the export %d rows:\n%s", n, entries, len(got[0]), stdout)
				}
			}
		}
	}
	t.Run("checkpoint", func(t *testing.T) { check(t, m.Checkpoint) })
	t.Run("rescaled", func(t *testing.T) {
		n := m.Checkpoint + 1000
		writeManifest(t, store, rescaled(m, 3, n))
		check(t, n)
	})

	t.Run("errors", func(t *testing.T) {
		n := strconv.FormatInt(m.Checkpoint, 10)
		out := filepath.Join(dir, "bad.parquet")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--operator", "nosuch"}, `no state of operator "nosuch"`},
			{[]string{"--operator", "evens"}, `no state of operator "evens"`},
			{[]string{"--operator", "per_user", "--format", "csv"}, `--format: format "csv": want parquet or arrow`},
			{[]string{"--file", out}, `"operator" not set`},
		} {
			args := append([]string{"state", "export", job, n, "--store", "file://" + store}, c.args...)
			if !slices.Contains(c.args, "--file") {
				args = append(args, "--file", out)
			}
			if stderr := weirFails(t, args...); !strings.Contains(stderr, c.want) {
				t.Errorf("%v: stderr %q, want %q", c.args, stderr, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%v: a failed export left %s", c.args, out)
			}
		}
		all := manifests(t, store, job)
		i := slices.IndexFunc(all, func(m *manifest.Manifest) bool { return m.Final })
		if i < 0 {
			t.Fatal("no final checkpoint is retained")
		}
		final := all[i]
		stderr := weirFails(t, "state", "export", job, strconv.FormatInt(final.Checkpoint, 10), "--operator", "per_user", "--file", out, "--store", "file://"+store)
		if !strings.Contains(stderr, "it is the final checkpoint") {
			t.Errorf("final checkpoint: %s", stderr)
		}
		// A damaged state file is refused, naming it.
		f := opFiles(m, "per_user")[0]
		path := filepath.Join(store, filepath.FromSlash(f.Key))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[f.Offset+f.Size/2] ^= 0xff // the file's middle byte, in its object
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		stderr = weirFails(t, "state", "export", job, n, "--operator", "per_user", "--file", out, "--store", "file://"+store)
		if !strings.Contains(stderr, f.Key) || !strings.Contains(stderr, "SHA-256") {
			t.Errorf("damaged file: %s", stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("a failed export left %s", out)
		}
	})
}

// readEvents returns the events of the source rides the checkpoint's
// positions say were read: event i of split i % K is read when i is below
// the split's next event.
func readEvents(t *testing.T, js *spec.Job, m *manifest.Manifest) []row {
	t.Helper()
	next := map[int]int64{}
	k := 0
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			raw, ok := s.SourcePositions["rides"]
			if !ok {
				continue
			}
			var pos struct { // the task's wrapping of datagen's position
				Position struct {
					Splits map[string]struct {
						Next int64 `json:"next"`
						Of   int   `json:"of"`
					} `json:"splits"`
				} `json:"position"`
			}
			if err := json.Unmarshal(raw, &pos); err != nil {
				t.Fatalf("position %s: %v", raw, err)
			}
			for id, sp := range pos.Position.Splits {
				j, err := strconv.Atoi(id)
				if err != nil {
					t.Fatalf("split id %q: %v", id, err)
				}
				next[j], k = sp.Next, sp.Of
			}
		}
	}
	if k == 0 || len(next) != k {
		t.Fatalf("checkpoint %d: positions of %d splits of %d", m.Checkpoint, len(next), k)
	}
	src := &js.Effective().Sources[0]
	st, err := connector.SourceSchema(src)
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	gen := datagen.NewRows(src, st)
	var vals []any
	for i := range src.Count {
		if i >= next[int(i%int64(k))] {
			continue
		}
		vals = gen.Row(i, vals[:0])
		r := row{}
		for c, f := range st.Schema.Fields() {
			r[f.Name] = vals[c]
		}
		out = append(out, r)
	}
	return out
}

type row = map[string]any // an exported or recomputed row, by column

// checkExport compares an operator's exported rows with its state
// recomputed from the events read.
func checkExport(op string, got []row, read []row) error {
	switch op {
	case "per_user":
		type acc struct {
			n   int64
			sum float64
			day time.Time
		}
		want := map[int64]*acc{}
		for _, e := range read {
			u := e["user"].(int64)
			if want[u] == nil {
				want[u] = &acc{day: e["ts"].(time.Time).UTC().Truncate(24 * time.Hour)}
			}
			want[u].n++
			want[u].sum += e["fare"].(float64)
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d rows, want one per user read: %d", len(got), len(want))
		}
		for _, r := range got {
			u := r["user"].(int64)
			w := want[u]
			switch {
			case w == nil:
				return fmt.Errorf("row %v: user %d was not read", r, u)
			case r["n__count"] != w.n || r["total__count"] != w.n:
				return fmt.Errorf("user %d: row %v, want count %d", u, r, w.n)
			case math.Abs(r["total__sum"].(float64)-w.sum) > 1e-9*w.sum:
				return fmt.Errorf("user %d: total__sum %v, want %v", u, r["total__sum"], w.sum)
			case !r["window_start"].(time.Time).Equal(w.day):
				return fmt.Errorf("user %d: window_start %v, want %v", u, r["window_start"], w.day)
			case r["key_group"] != int32(arrowfmt.KeyGroup(arrowfmt.HashKeyValues(u), arrowfmt.DefaultMaxParallelism)):
				return fmt.Errorf("user %d: key_group %v", u, r["key_group"])
			}
		}
	case "seqcheck":
		want := map[int64]int64{}
		for _, e := range read {
			want[e["ride_id"].(int64)%40]++
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d rows, want one per k read: %d", len(got), len(want))
		}
		for _, r := range got {
			k := r["k"].(int64)
			v, _ := r["value"].([]byte)
			if r["table"] != "n" || len(v) != 8 || int64(binary.LittleEndian.Uint64(v)) != want[k] || r["timestamp"] != nil {
				return fmt.Errorf("row %v: want table n, k %d's counter %d", r, k, want[k])
			}
		}
	case "pairs":
		var want, rows []string
		for _, e := range read {
			id := e["ride_id"].(int64)
			if id%2 == 0 {
				want = append(want, fmt.Sprintf("left %d", id))
			} else {
				want = append(want, fmt.Sprintf("right %d %d", id-1, id))
			}
		}
		for _, r := range got {
			if r["side"] == "left" {
				rows = append(rows, fmt.Sprintf("left %v", r["left.ride_id"]))
			} else {
				rows = append(rows, fmt.Sprintf("%v %v %v", r["side"], r["right.k"], r["right.ride_id"]))
			}
		}
		slices.Sort(want)
		slices.Sort(rows)
		if !slices.Equal(rows, want) {
			return fmt.Errorf("%d rows, want %d: the kept rows differ from those read", len(rows), len(want))
		}
	}
	return nil
}

// readExport reads an exported file with arrow-go's readers alone, a row
// per map.
func readExport(t *testing.T, file, format string) []row {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	switch format {
	case "parquet":
		tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), parquet.NewReaderProperties(memory.DefaultAllocator),
			pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		defer tbl.Release()
		tr := array.NewTableReader(tbl, 1024)
		defer tr.Release()
		for tr.Next() {
			rec := tr.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
	case "arrow":
		rd, err := ipc.NewFileReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		defer rd.Close()
		for i := range rd.NumRecords() {
			rec, err := rd.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
	}
	var rows []row
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			r := row{}
			for c, f := range rec.Schema().Fields() {
				r[f.Name] = arrowfmt.Value(rec.Column(c), i)
			}
			rows = append(rows, r)
		}
		rec.Release()
	}
	return rows
}

// rescaled returns m as a rescale of every keyed vertex to p lists it,
// before the new subtasks' first checkpoint: each subtask lists the files
// of the old subtasks that overlap its key groups, and keeps its own of
// them.
func rescaled(m *manifest.Manifest, p int, n int64) *manifest.Manifest {
	r := *m
	r.Checkpoint = n
	r.Vertices = nil
	for _, v := range m.Vertices {
		if !v.Keyed {
			r.Vertices = append(r.Vertices, v)
			continue
		}
		var files []manifest.File
		for _, s := range v.Subtasks {
			files = append(files, s.State...)
		}
		overlapping := func(start, end int) []manifest.File {
			var fs []manifest.File
			for _, f := range files {
				if f.KeyGroupStart < end && start < f.KeyGroupEnd {
					fs = append(fs, f)
				}
			}
			return fs
		}
		nv := manifest.Vertex{Name: v.Name, Keyed: true, Parallelism: p}
		for i := range p {
			start, end := arrowfmt.KeyGroupRange(i, m.MaxParallelism, p)
			nv.Subtasks = append(nv.Subtasks, manifest.Subtask{Index: i, KeyGroupStart: start, KeyGroupEnd: end,
				State: overlapping(start, end), Watermark: v.Subtasks[0].Watermark})
		}
		r.Vertices = append(r.Vertices, nv)
	}
	return &r
}

func writeManifest(t *testing.T, store string, m *manifest.Manifest) {
	t.Helper()
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(store, filepath.FromSlash(layout.ManifestKey(m.Job, m.Checkpoint)))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
