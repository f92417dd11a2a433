package manifest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/statestore/manifest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// golden is the manifest in testdata/v1.json.
func golden() *manifest.Manifest {
	const job = "rides-0a1b2c3d"
	return &manifest.Manifest{
		Version:        1,
		Job:            job,
		Checkpoint:     42,
		Attempt:        2,
		Triggered:      time.Date(2026, 1, 1, 0, 1, 0, 500e6, time.UTC),
		Completed:      time.Date(2026, 1, 1, 0, 1, 1, 250e6, time.UTC),
		MaxParallelism: 128,
		SpecSHA256:     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Vertices: []manifest.Vertex{
			{Name: "rides", Parallelism: 2, Subtasks: []manifest.Subtask{
				{Index: 0, SourcePositions: map[string]json.RawMessage{"rides": json.RawMessage(`{"file":"in/rides-1.jsonl","offset":1048576}`)},
					Metrics: manifest.SubtaskMetrics{SyncMs: 1}},
				{Index: 1, SourcePositions: map[string]json.RawMessage{"rides": json.RawMessage(`{"file":"in/rides-2.jsonl","offset":524288}`)},
					Metrics: manifest.SubtaskMetrics{SyncMs: 1}},
			}},
			{Name: "totals", Parallelism: 1, Subtasks: []manifest.Subtask{
				{Index: 0, SinkTransactions: []manifest.Txn{{Sink: "totals", ID: "part-0-a2-17",
					Handle: json.RawMessage(`{"staged":"out/totals/_staging/part-0-a2-17.jsonl","final":"out/totals/part-0-a2-17.jsonl"}`)}},
					Metrics: manifest.SubtaskMetrics{AlignMs: 3}},
			}},
			{Name: "window", Keyed: true, Parallelism: 2, Subtasks: []manifest.Subtask{
				{Index: 0, KeyGroupStart: 0, KeyGroupEnd: 64, State: []manifest.File{
					{Key: "jobs/" + job + "/state/window/0/base-40.arrow", Size: 1 << 20,
						SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
						Kind:   manifest.KindBase, Operator: "window", KeyGroupStart: 0, KeyGroupEnd: 64},
					{Key: "jobs/" + job + "/state/window/0/delta-41.arrow", Size: 4096,
						SHA256: "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9",
						Kind:   manifest.KindDelta, Operator: "window", KeyGroupStart: 0, KeyGroupEnd: 64},
					{Key: "jobs/" + job + "/checkpoints/42/window-0-delta.arrow", Size: 0,
						SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
						Kind:   manifest.KindDelta, Operator: "window", KeyGroupStart: 0, KeyGroupEnd: 64},
				}, Metrics: manifest.SubtaskMetrics{AlignMs: 12, SyncMs: 2, AsyncMs: 35}},
				{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 128, State: []manifest.File{
					{Key: "jobs/" + job + "/state/window/1/base-42.arrow", Size: 2 << 20,
						SHA256: "baa5a0964d3320fbc0c6a922140453c8513ea24ab8fd0577034804a967248096",
						Kind:   manifest.KindBase, Operator: "window", KeyGroupStart: 64, KeyGroupEnd: 128},
				}, Metrics: manifest.SubtaskMetrics{AlignMs: 9, SyncMs: 3, AsyncMs: 61, UploadedBytes: 2 << 20}},
			}},
		},
	}
}

func encode(t testing.TB, m *manifest.Manifest) []byte {
	t.Helper()
	data, err := m.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return data
}

// TestGoldenV1 decodes a manifest as version 1 wrote it. If this fails, the
// change breaks restoring from existing checkpoints: make it additive, or
// bump Version and keep reading version 1.
func TestGoldenV1(t *testing.T) {
	data, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifest.Decode(data)
	if err != nil {
		t.Fatalf("Decode(testdata/v1.json): %v", err)
	}
	if want := golden(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(testdata/v1.json) =\n%+v\nwant\n%+v", got, want)
	}
}

// TestEncodeStable: the encoder writes testdata/v1.json byte for byte, so
// field order and layout do not drift.
func TestEncodeStable(t *testing.T) {
	want, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, golden()); !bytes.Equal(got, want) {
		t.Fatalf("Encode(golden) differs from testdata/v1.json:\n%s", got)
	}
}

func TestRoundTrip(t *testing.T) {
	m := golden()
	// Inputs an encoder normalises: a time in another zone, opaque JSON
	// with spaces, a savepoint.
	m.Savepoint = true
	m.Triggered = m.Triggered.In(time.FixedZone("CET", 3600))
	m.Vertices[0].Subtasks[0].SourcePositions["rides"] = json.RawMessage(` { "file" : "a<b>&c" } `)
	before := encode(t, golden()) // Encode does not change its receiver
	data := encode(t, m)
	got, err := manifest.Decode(data)
	if err != nil {
		t.Fatalf("Decode(Encode(m)): %v\n%s", err, data)
	}
	if !got.Triggered.Equal(m.Triggered) || got.Triggered.Location() != time.UTC {
		t.Errorf("triggered = %v, want %v in UTC", got.Triggered, m.Triggered)
	}
	if p := string(got.Vertices[0].Subtasks[0].SourcePositions["rides"]); p != `{"file":"a<b>&c"}` {
		t.Errorf("position = %s, want it compacted and not HTML-escaped", p)
	}
	again, err := manifest.Decode(encode(t, got))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, got) {
		t.Errorf("second round trip differs:\n%+v\n%+v", again, got)
	}
	if !got.Savepoint {
		t.Error("savepoint lost")
	}
	if after := encode(t, golden()); !bytes.Equal(before, after) {
		t.Error("golden encodes differently twice")
	}
}

func TestFiles(t *testing.T) {
	m := golden()
	// After rescaling from 1 to 2, both subtasks start from the old base.
	old := manifest.File{Key: "jobs/rides-0a1b2c3d/state/window/0/base-30.arrow", Size: 10,
		SHA256: m.SpecSHA256, Kind: manifest.KindBase, Operator: "window", KeyGroupStart: 0, KeyGroupEnd: 128}
	for i := range m.Vertices[2].Subtasks {
		s := &m.Vertices[2].Subtasks[i]
		s.State = append([]manifest.File{old}, s.State...)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got := m.Files()
	want := []string{
		"jobs/rides-0a1b2c3d/checkpoints/42/window-0-delta.arrow",
		"jobs/rides-0a1b2c3d/state/window/0/base-30.arrow",
		"jobs/rides-0a1b2c3d/state/window/0/base-40.arrow",
		"jobs/rides-0a1b2c3d/state/window/0/delta-41.arrow",
		"jobs/rides-0a1b2c3d/state/window/1/base-42.arrow",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Files() = %q, want %q", got, want)
	}
}

// TestPackedFiles: files packed into one object, at their offsets, are
// valid in one subtask and across subtasks, and the object is listed once
// for garbage collection; one file at an offset must be the same
// everywhere.
func TestPackedFiles(t *testing.T) {
	m := golden()
	const obj = "jobs/rides-0a1b2c3d/state/_workers/w-1/42-a2-1.arrow"
	var at int64
	for i := range m.Vertices[2].Subtasks {
		s := &m.Vertices[2].Subtasks[i]
		for j := range s.State {
			f := &s.State[j]
			f.Key, f.Packed, f.Offset = obj, true, at
			at += max(f.Size, 1) // an encoded file is never empty
		}
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := m.Files(); !reflect.DeepEqual(got, []string{obj}) {
		t.Errorf("Files() = %q, want the object once", got)
	}
	checkRoundTrip(t, m)
	s0, s1 := &m.Vertices[2].Subtasks[0], &m.Vertices[2].Subtasks[1]
	s1.State[0].Offset = s0.State[0].Offset // the same file, another size
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "differ from") {
		t.Errorf("two sizes at one offset: %v", err)
	}
}

// TestValidateBaseInParts: a base uploaded in parts (one file per key
// group range) is followed by deltas of any range its parts cover
// together, also in parts.
func TestValidateBaseInParts(t *testing.T) {
	m := golden()
	st := &m.Vertices[2].Subtasks[0]
	base, delta := st.State[0], st.State[1]
	part := func(f manifest.File, start, end int) manifest.File {
		f.Key = fmt.Sprintf("%s-%d-%d", f.Key, start, end)
		f.KeyGroupStart, f.KeyGroupEnd = start, end
		return f
	}
	st.State = []manifest.File{part(base, 0, 10), part(base, 10, 40), part(base, 40, 64), delta, part(delta, 5, 50)}
	if err := m.Validate(); err != nil {
		t.Fatalf("a base in parts: %v", err)
	}
	st.State = []manifest.File{part(base, 0, 10), part(base, 20, 64), delta}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "[0, 64) before any base") {
		t.Fatalf("a delta over a gap between parts: %v", err)
	}
}

// TestValidate breaks one rule at a time: the manifest is refused, by
// Validate, Encode and Decode alike, with a problem naming the field.
func TestValidate(t *testing.T) {
	window := func(m *manifest.Manifest) *manifest.Vertex { return &m.Vertices[2] }
	file := func(m *manifest.Manifest, s, f int) *manifest.File { return &window(m).Subtasks[s].State[f] }
	for _, tc := range []struct {
		name   string
		break_ func(m *manifest.Manifest)
		field  string // the problem's field
		msg    string // part of its message
	}{
		{"version", func(m *manifest.Manifest) { m.Version = 0 }, "version", "want 1"},
		{"empty job", func(m *manifest.Manifest) { m.Job = "" }, "job", `"" is not a job id`},
		{"job with slash", func(m *manifest.Manifest) { m.Job = "a/b" }, "job", `"a/b"`},
		{"checkpoint zero", func(m *manifest.Manifest) { m.Checkpoint = 0 }, "checkpoint", "0: want > 0"},
		{"checkpoint negative", func(m *manifest.Manifest) { m.Checkpoint = -3 }, "checkpoint", "-3"},
		{"attempt", func(m *manifest.Manifest) { m.Attempt = 0 }, "attempt", "want >= 1"},
		{"no trigger time", func(m *manifest.Manifest) { m.Triggered = time.Time{} }, "triggered", "0001-01-01T00:00:00Z"},
		{"completed before triggered", func(m *manifest.Manifest) { m.Completed = m.Triggered.Add(-time.Second) }, "completed", "before triggered"},
		{"maxParallelism", func(m *manifest.Manifest) { m.MaxParallelism = 0 }, "maxParallelism", "0: want 1..32768"},
		{"maxParallelism too big", func(m *manifest.Manifest) { m.MaxParallelism = 40000 }, "maxParallelism", "40000"},
		{"spec hash short", func(m *manifest.Manifest) { m.SpecSHA256 = "abc" }, "specSha256", `"abc": want 64 lowercase hex digits`},
		{"spec hash upper", func(m *manifest.Manifest) { m.SpecSHA256 = strings.ToUpper(m.SpecSHA256) }, "specSha256", "lowercase"},
		{"no vertices", func(m *manifest.Manifest) { m.Vertices = nil }, "vertices", "at least one"},
		{"vertex name", func(m *manifest.Manifest) { m.Vertices[0].Name = "1rides" }, "vertices[0].name", `"1rides" is not a vertex name`},
		{"vertices unsorted", func(m *manifest.Manifest) { m.Vertices[0], m.Vertices[1] = m.Vertices[1], m.Vertices[0] }, "vertices[1].name", "sorted"},
		{"vertices repeated", func(m *manifest.Manifest) { m.Vertices[1].Name = "rides" }, "vertices[1].name", `"rides" after "rides"`},
		{"parallelism zero", func(m *manifest.Manifest) { m.Vertices[1].Parallelism = 0 }, "vertices[1].parallelism", "0: want 1..maxParallelism"},
		{"parallelism above maxParallelism", func(m *manifest.Manifest) {
			m.MaxParallelism = 1
			m.Vertices[0].Parallelism = 2
			window(m).Keyed = false
			clearRanges(window(m))
		},
			"vertices[0].parallelism", "2: want 1..maxParallelism (1)"},
		{"subtask missing", func(m *manifest.Manifest) { m.Vertices[0].Subtasks = m.Vertices[0].Subtasks[:1] }, "vertices[0].subtasks", "1 subtasks: want one per parallel instance (parallelism 2)"},
		{"subtask index", func(m *manifest.Manifest) { m.Vertices[0].Subtasks[1].Index = 0 }, "vertices[0].subtasks[1].index", "0: want 1"},
		{"subtasks unsorted", func(m *manifest.Manifest) {
			s := m.Vertices[0].Subtasks
			s[0], s[1] = s[1], s[0]
		}, "vertices[0].subtasks[0].index", "1: want 0"},
		{"non-keyed with range", func(m *manifest.Manifest) { m.Vertices[0].Subtasks[1].KeyGroupEnd = 5 }, "vertices[0].subtasks[1].keyGroupStart", "[0, 5): want [0, 0)"},
		{"keyed first range", func(m *manifest.Manifest) { window(m).Subtasks[0].KeyGroupStart = 1 }, "vertices[2].subtasks[0].keyGroupStart", "1: want 0"},
		{"keyed gap", func(m *manifest.Manifest) { window(m).Subtasks[1].KeyGroupStart = 65 }, "vertices[2].subtasks[1].keyGroupStart", "65: want 64"},
		{"keyed overlap", func(m *manifest.Manifest) { window(m).Subtasks[0].KeyGroupEnd = 65 }, "vertices[2].subtasks[1].keyGroupStart", "64: want 65"},
		{"keyed short", func(m *manifest.Manifest) { window(m).Subtasks[1].KeyGroupEnd = 127 }, "vertices[2].subtasks[1].keyGroupEnd", "127: the last subtask's range must end at maxParallelism (128)"},
		{"keyed empty range", func(m *manifest.Manifest) {
			window(m).Subtasks[0].KeyGroupEnd = 0
			window(m).Subtasks[1].KeyGroupStart = 0
		}, "vertices[2].subtasks[0].keyGroupEnd", "0: want more than keyGroupStart (0)"},
		{"keyed beyond", func(m *manifest.Manifest) { window(m).Subtasks[1].KeyGroupEnd = 129 }, "vertices[2].subtasks[1].keyGroupEnd", "129"},
		{"file key empty", func(m *manifest.Manifest) { file(m, 0, 0).Key = "" }, "vertices[2].subtasks[0].state[0].key", `"": want a relative bucket key (empty)`},
		{"file key absolute", func(m *manifest.Manifest) { file(m, 0, 0).Key = "/etc/passwd" }, "vertices[2].subtasks[0].state[0].key", "starts with '/'"},
		{"file key dotdot", func(m *manifest.Manifest) { file(m, 0, 1).Key = "jobs/../../x" }, "vertices[2].subtasks[0].state[1].key", `".." segment`},
		{"file twice in a subtask", func(m *manifest.Manifest) { file(m, 0, 1).Key = file(m, 0, 0).Key }, "vertices[2].subtasks[0].state[1].key", "listed twice"},
		{"file shared with another size", func(m *manifest.Manifest) { file(m, 1, 0).Key = file(m, 0, 0).Key },
			"vertices[2].subtasks[1].state[0].key", "differ from vertices[2].subtasks[0].state[0]"},
		{"packed file twice in a subtask", func(m *manifest.Manifest) {
			a, b := file(m, 0, 0), file(m, 0, 1)
			b.Key, a.Packed, b.Packed, a.Offset, b.Offset = a.Key, true, true, 100, 100
		}, "vertices[2].subtasks[0].state[1].key", `@100": listed twice`},
		{"offset of a file not packed", func(m *manifest.Manifest) { file(m, 0, 0).Offset = 8 }, "vertices[2].subtasks[0].state[0].offset", "8: want >= 0, and 0 in a file that is not packed"},
		{"negative offset", func(m *manifest.Manifest) { f := file(m, 0, 0); f.Packed, f.Offset = true, -1 }, "vertices[2].subtasks[0].state[0].offset", "-1"},
		{"file size", func(m *manifest.Manifest) { file(m, 0, 0).Size = -1 }, "vertices[2].subtasks[0].state[0].size", "-1: want >= 0"},
		{"file sha", func(m *manifest.Manifest) { file(m, 1, 0).SHA256 = strings.Repeat("g", 64) }, "vertices[2].subtasks[1].state[0].sha256", "64 lowercase hex"},
		{"file sha short", func(m *manifest.Manifest) { file(m, 1, 0).SHA256 = "" }, "vertices[2].subtasks[1].state[0].sha256", `""`},
		{"file kind", func(m *manifest.Manifest) { file(m, 0, 0).Kind = "full" }, "vertices[2].subtasks[0].state[0].kind", `"full": want "base", "delta" or "store"`},
		{"name of a base", func(m *manifest.Manifest) { file(m, 0, 0).Name = "000001.sst" }, "vertices[2].subtasks[0].state[0].name", `only a file of kind "store" has a name`},
		{"store file name", func(m *manifest.Manifest) {
			f := file(m, 0, 0)
			f.Kind, f.Name = manifest.KindStore, "../MANIFEST"
		}, "vertices[2].subtasks[0].state[0].name", "is not a store file's name"},
		{"store file unnamed", func(m *manifest.Manifest) { file(m, 0, 0).Kind = manifest.KindStore }, "vertices[2].subtasks[0].state[0].name", "is not a store file's name"},
		{"compressed base", func(m *manifest.Manifest) { file(m, 0, 0).Compression = "zstd" }, "vertices[2].subtasks[0].state[0].compression", `want "zstd", in a file of kind "store" only`},
		{"store file compression", func(m *manifest.Manifest) {
			f := file(m, 0, 0)
			f.Kind, f.Name, f.Compression = manifest.KindStore, "000001.sst", "lz4"
		}, "vertices[2].subtasks[0].state[0].compression", `"lz4": want "zstd"`},
		{"store file twice", func(m *manifest.Manifest) {
			s := &window(m).Subtasks[0]
			f := s.State[0]
			f.Kind, f.Name, f.Key = manifest.KindStore, "000004.sst", "jobs/x/state/window/0-64/42-a2-store-000004.sst"
			g := f
			g.Key = "jobs/x/state/window/0-64/43-a2-store-000004.sst"
			s.State = append(s.State, f, g)
		}, "vertices[2].subtasks[0].state[4].name", `"000004.sst": listed twice for operator "window", key groups [0, 64)`},
		{"delta first", func(m *manifest.Manifest) {
			s := window(m).Subtasks[0].State
			s[0], s[1] = s[1], s[0]
		}, "vertices[2].subtasks[0].state[0].kind", `delta for operator "window", key groups [0, 64) before any base`},
		{"delta beyond its base", func(m *manifest.Manifest) { file(m, 0, 0).KeyGroupEnd = 32 }, "vertices[2].subtasks[0].state[1].kind", "[0, 64) before any base"},
		{"delta of another operator", func(m *manifest.Manifest) { file(m, 0, 1).Operator = "other" }, "vertices[2].subtasks[0].state[1].kind", `operator "other"`},
		{"file operator", func(m *manifest.Manifest) { file(m, 0, 0).Operator = "" }, "vertices[2].subtasks[0].state[0].operator", `"" is not an operator name`},
		{"file range empty", func(m *manifest.Manifest) { file(m, 1, 0).KeyGroupStart = 128 }, "vertices[2].subtasks[1].state[0].keyGroupStart", "[128, 128): want a non-empty range"},
		{"file range beyond", func(m *manifest.Manifest) { file(m, 1, 0).KeyGroupEnd = 129 }, "vertices[2].subtasks[1].state[0].keyGroupStart", "within [0, maxParallelism (128))"},
		{"file range disjoint", func(m *manifest.Manifest) { file(m, 1, 0).KeyGroupStart, file(m, 1, 0).KeyGroupEnd = 0, 64 },
			"vertices[2].subtasks[1].state[0].keyGroupStart", "[0, 64) does not overlap the subtask's key groups [64, 128)"},
		{"file range in non-keyed vertex", func(m *manifest.Manifest) {
			m.Vertices[1].Subtasks[0].State = []manifest.File{{Key: "k", SHA256: m.SpecSHA256, Kind: "base", Operator: "totals", KeyGroupEnd: 1}}
		}, "vertices[1].subtasks[0].state[0].keyGroupStart", "want [0, 0) in a vertex that is not keyed"},
		{"source name", func(m *manifest.Manifest) {
			m.Vertices[0].Subtasks[0].SourcePositions["bad name"] = json.RawMessage(`1`)
		}, `vertices[0].subtasks[0].sourcePositions["bad name"]`, "is not a source name"},
		{"position not JSON", func(m *manifest.Manifest) {
			m.Vertices[0].Subtasks[0].SourcePositions["rides"] = json.RawMessage(`{"offset":`)
		}, `vertices[0].subtasks[0].sourcePositions["rides"]`, "want a JSON value other than null"},
		{"position null", func(m *manifest.Manifest) {
			m.Vertices[0].Subtasks[0].SourcePositions["rides"] = json.RawMessage(`null`)
		}, `vertices[0].subtasks[0].sourcePositions["rides"]`, `"null"`},
		{"txn sink", func(m *manifest.Manifest) { m.Vertices[1].Subtasks[0].SinkTransactions[0].Sink = "" }, "vertices[1].subtasks[0].sinkTransactions[0].sink", "not a sink name"},
		{"txn id", func(m *manifest.Manifest) { m.Vertices[1].Subtasks[0].SinkTransactions[0].ID = "" }, "vertices[1].subtasks[0].sinkTransactions[0].id", "empty"},
		{"txn id repeated", func(m *manifest.Manifest) {
			s := &m.Vertices[1].Subtasks[0]
			s.SinkTransactions = append(s.SinkTransactions, s.SinkTransactions[0])
		}, "vertices[1].subtasks[0].sinkTransactions[1].id", `"part-0-a2-17": sink "totals" already has this transaction at vertices[1].subtasks[0].sinkTransactions[0]`},
		{"txn handle", func(m *manifest.Manifest) { m.Vertices[1].Subtasks[0].SinkTransactions[0].Handle = nil }, "vertices[1].subtasks[0].sinkTransactions[0].handle", "want a JSON value"},
		{"metrics", func(m *manifest.Manifest) { window(m).Subtasks[1].Metrics.AsyncMs = -1 }, "vertices[2].subtasks[1].metrics.asyncMs", "-1: want >= 0"},
		{"metrics bytes", func(m *manifest.Manifest) { window(m).Subtasks[1].Metrics.UploadedBytes = -1 }, "vertices[2].subtasks[1].metrics.uploadedBytes", "-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := golden()
			tc.break_(m)
			err := m.Validate()
			ps, ok := err.(manifest.Problems)
			if !ok {
				t.Fatalf("Validate() = %v, want Problems", err)
			}
			found := false
			for _, p := range ps {
				if p.Field == tc.field && strings.Contains(p.Msg, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Fatalf("Validate() = %v\nwant a problem at %s containing %q", err, tc.field, tc.msg)
			}
			if _, err := m.Encode(); !errors.As(err, new(manifest.Problems)) {
				t.Errorf("Encode() = %v, want Problems", err)
			}
			// The same manifest read from the bucket is corrupt.
			data, err := json.Marshal(m)
			if err != nil {
				return // e.g. an invalid RawMessage: the JSON cannot even be written
			}
			_, err = manifest.Decode(data)
			if !errors.Is(err, manifest.ErrCorrupt) && !(tc.field == "version" && err != nil) {
				t.Errorf("Decode() = %v, want ErrCorrupt", err)
			}
		})
	}
}

func clearRanges(v *manifest.Vertex) {
	for i := range v.Subtasks {
		s := &v.Subtasks[i]
		s.KeyGroupStart, s.KeyGroupEnd = 0, 0
		for j := range s.State {
			s.State[j].KeyGroupStart, s.State[j].KeyGroupEnd = 0, 0
		}
	}
}

// TestValidateAll: every problem is reported at once.
func TestValidateAll(t *testing.T) {
	m := golden()
	m.Checkpoint = 0
	m.SpecSHA256 = ""
	m.Vertices[2].Subtasks[0].State[0].Size = -5
	err := m.Validate()
	ps, _ := err.(manifest.Problems)
	if len(ps) != 3 {
		t.Fatalf("Validate() = %v, want 3 problems", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "3 problems:\n  checkpoint: 0") {
		t.Errorf("message = %q", msg)
	}
}

func TestDecodeTruncated(t *testing.T) {
	data := bytes.TrimRight(encode(t, golden()), "\n")
	for i := range len(data) {
		m, err := manifest.Decode(data[:i])
		if !errors.Is(err, manifest.ErrCorrupt) || m != nil {
			t.Fatalf("Decode(first %d of %d bytes) = %v, %v; want ErrCorrupt", i, len(data), m, err)
		}
	}
	_, err := manifest.Decode(data[:len(data)/2])
	if want := "manifest: corrupt: truncated JSON"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Decode(half) = %v, want %q", err, want)
	}
}

// TestDecodeBitFlips flips one bit in every byte of a valid manifest: the
// lowest (a digit or letter becomes its neighbour) in even bytes, the
// others in turn in odd ones. Most flips break the JSON or a rule and are
// refused as corrupt; a flip that yields another valid manifest (a digit of
// a size, a letter of a name) is accepted, and is for restore to catch
// when the file's size or SHA-256 does not match. Either way nothing
// panics and an accepted manifest round-trips.
func TestDecodeBitFlips(t *testing.T) {
	data := encode(t, golden())
	accepted, refused := 0, 0
	for i := range data {
		bit := 0
		if i%2 == 1 {
			bit = 1 + i/2%7
		}
		flipped := bytes.Clone(data)
		flipped[i] ^= 1 << bit
		m, err := manifest.Decode(flipped)
		if err != nil {
			if m != nil || !errors.Is(err, manifest.ErrCorrupt) && !errors.Is(err, manifest.ErrUnsupportedVersion) {
				t.Fatalf("flip byte %d bit %d: Decode = %v, %v; want nil and ErrCorrupt or ErrUnsupportedVersion", i, bit, m, err)
			}
			refused++
			continue
		}
		accepted++
		checkRoundTrip(t, m)
	}
	t.Logf("%d flips refused, %d accepted", refused, accepted)
}

// TestDecodeRefusesBrokenInvariants edits a valid manifest's JSON so that it
// stays valid JSON but breaks a rule.
func TestDecodeRefusesBrokenInvariants(t *testing.T) {
	data := string(encode(t, golden()))
	for _, tc := range []struct{ old, new, want string }{
		{`"keyGroupEnd": 64,` + "\n          \"state\"", `"keyGroupEnd": 65,` + "\n          \"state\"", "vertices[2].subtasks[1].keyGroupStart: 64: want 65"},
		{`"parallelism": 1,`, `"parallelism": 2,`, "vertices[1].subtasks: 1 subtasks"},
		{`"checkpoint": 42`, `"checkpoint": -42`, "checkpoint: -42: want > 0"},
		{`"kind": "base"`, `"kind": "bass"`, `vertices[2].subtasks[0].state[0].kind: "bass"`},
		{`"sha256": "2c26`, `"sha256": "2C26`, "vertices[2].subtasks[0].state[0].sha256"},
		{`"index": 1`, `"index": 7`, "vertices[0].subtasks[1].index: 7: want 1"},
		{`"name": "totals"`, `"name": "rides"`, "vertices[1].name"},
		{`"size": 4096`, `"size": -4096`, "size: -4096"},
		{`"completed": "2026-01-01T00:01:01.25Z"`, `"completed": "2026-01-01T00:00:01.25Z"`, "completed: 2026-01-01T00:00:01.25Z is before triggered"},
		{`"version": 1`, `"version": 0`, "version: 0 is not a format version"},
		{`"version": 1`, `"version": 1.5`, "version: 1.5"},
		{`"version": 1`, `"version": "1"`, `version: "1"`},
		{`"attempt": 2`, `"attempt": 2.0`, "attempt"},
		{`"attempt": 2`, `"attempt": null`, "attempt: null is not allowed"},
		{`"attempt": 2`, `"attempt": 99999999999999999999`, "attempt"},
		{`"job": "rides-0a1b2c3d"`, `"JOB": "rides-0a1b2c3d"`, `JOB: unknown field (names are case-sensitive: did you mean "job"?)`},
		{`"job": "rides-0a1b2c3d"`, `"job": "rides-0a1b2c3d", "job": "other"`, "job: repeated"},
		{`"attempt": 2`, `"attempt": 2, "owner": "me"`, "owner: unknown field: want one of attempt, checkpoint"},
		{`"uploadedBytes": 0`, `"uploadedBytes": 0, "extra": 1`, "vertices[0].subtasks[0].metrics.extra: unknown field"},
		{`"alignMs": 3`, `"alignMs": "3"`, "alignMs"},
		{`"vertices": [`, `"vertices": {"x": [`, "vertices: want an array"},
		{`"triggered": "2026-01-01T00:01:00.5Z"`, `"triggered": "yesterday"`, "triggered"},
	} {
		if !strings.Contains(data, tc.old) {
			t.Fatalf("test data does not contain %q", tc.old)
		}
		edited := strings.Replace(data, tc.old, tc.new, 1)
		if tc.new == `"vertices": {"x": [` {
			edited = strings.TrimRight(edited, "}\n") + "}}"
		}
		_, err := manifest.Decode([]byte(edited))
		if !errors.Is(err, manifest.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: Decode = %v\nwant ErrCorrupt mentioning %q", tc.old, tc.new, err, tc.want)
		}
	}
}

func TestDecodeRefusesNotAManifest(t *testing.T) {
	valid := encode(t, golden())
	for name, data := range map[string]string{
		"empty":         "",
		"spaces":        " \n",
		"null":          "null",
		"array":         "[]",
		"number":        "1",
		"empty object":  "{}",
		"no version":    `{"job":"j"}`,
		"Version":       `{"Version":2}`,
		"trailing data": string(valid) + "{}",
		"trailing junk": string(valid) + "x",
		"two values":    string(valid) + string(valid),
		"bad UTF-8":     strings.Replace(string(valid), "rides-0a1b2c3d", "rides-\xff", 1),
		"vertex null":   strings.Replace(string(valid), `"vertices": [`, `"vertices": [null,`, 1),
	} {
		m, err := manifest.Decode([]byte(data))
		if !errors.Is(err, manifest.ErrCorrupt) || m != nil {
			t.Errorf("%s: Decode = %v, %v; want ErrCorrupt", name, m, err)
		}
	}
}

func TestDecodeNewerVersion(t *testing.T) {
	// A newer manifest may have fields this binary does not know; the
	// version is what it is refused for.
	data := strings.Replace(string(encode(t, golden())), `"version": 1,`, `"version": 4, "compression": "zstd",`, 1)
	_, err := manifest.Decode([]byte(data))
	if !errors.Is(err, manifest.ErrUnsupportedVersion) || errors.Is(err, manifest.ErrCorrupt) {
		t.Fatalf("Decode(version 4) = %v, want ErrUnsupportedVersion and not ErrCorrupt", err)
	}
	if want := "version 4 and this binary reads versions up to 3"; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not say %q", err, want)
	}
}

// TestStoreFilesNeedVersion2 checks that a manifest listing a store's
// files is version 2 (LowestVersion), encodes and decodes as it is, and
// is refused as version 1; one without them stays version 1.
func TestStoreFilesNeedVersion2(t *testing.T) {
	m := golden()
	if v := m.LowestVersion(); v != 1 {
		t.Fatalf("LowestVersion() = %d without store files, want 1", v)
	}
	s := &m.Vertices[2].Subtasks[0]
	for _, name := range []string{"000007.sst", "MANIFEST-000001", "marker.manifest.000001.MANIFEST-000001"} {
		s.State = append(s.State, manifest.File{Key: "jobs/rides-0a1b2c3d/state/window/0-64/42-a2-store-" + name, Size: 10, SHA256: strings.Repeat("ab", 32),
			Kind: manifest.KindStore, Operator: "window", KeyGroupStart: 0, KeyGroupEnd: 64, Name: name})
	}
	s.State[len(s.State)-3].Compression = manifest.CompressZstd
	if v := m.LowestVersion(); v != 2 {
		t.Fatalf("LowestVersion() = %d with store files, want 2", v)
	}
	m.Version = 2
	got, err := manifest.Decode(encode(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("Decode(Encode(m)) =\n%+v\nwant\n%+v", got, m)
	}
	m.Version = 1
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "a store file needs manifest version 2") {
		t.Errorf("Validate() of version 1 with store files = %v", err)
	}
}

// TestNarrowedFilesNeedVersion3 checks that a manifest listing a
// narrowed state file is version 3 (LowestVersion), also with store
// files, encodes and decodes as it is, and is refused as version 2; a
// store file cannot be narrowed.
func TestNarrowedFilesNeedVersion3(t *testing.T) {
	m := golden()
	s := &m.Vertices[2].Subtasks[0]
	s.State = append(s.State, manifest.File{Key: "jobs/rides-0a1b2c3d/state/window/0-64/42-a2-store-000007.sst", Size: 10, SHA256: strings.Repeat("ab", 32),
		Kind: manifest.KindStore, Operator: "window", KeyGroupStart: 0, KeyGroupEnd: 64, Name: "000007.sst"})
	s.State[0].Narrowed = true
	if v := m.LowestVersion(); v != 3 {
		t.Fatalf("LowestVersion() = %d with a narrowed file, want 3", v)
	}
	m.Version = 3
	got, err := manifest.Decode(encode(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("Decode(Encode(m)) =\n%+v\nwant\n%+v", got, m)
	}
	m.Version = 2
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "a narrowed file needs manifest version 3, and the manifest is version 2") {
		t.Errorf("Validate() of version 2 with a narrowed file = %v", err)
	}
	m.Version = 3
	s.State[len(s.State)-1].Narrowed = true
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), `narrowed: true: a file of kind "store" is not an Arrow file`) {
		t.Errorf("Validate() with a narrowed store file = %v", err)
	}
}

// TestDecodeAccepts what other JSON tools may write: reordered fields,
// other whitespace, empty optional lists, a time zone offset.
func TestDecodeAccepts(t *testing.T) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, encode(t, golden())); err != nil {
		t.Fatal(err)
	}
	data := strings.Replace(compact.String(), `"version":1,"job":"rides-0a1b2c3d",`, `"job":"rides-0a1b2c3d", "version":1,`, 1)
	data = strings.Replace(data, `"triggered":"2026-01-01T00:01:00.5Z"`, `"triggered":"2026-01-01T01:01:00.5+01:00"`, 1)
	data = strings.Replace(data, `"keyGroupEnd":0,"sinkTransactions"`, `"keyGroupEnd":0,"state":[],"sourcePositions":{},"sinkTransactions"`, 1)
	m, err := manifest.Decode([]byte(data))
	if err != nil {
		t.Fatalf("Decode: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(m, golden()) {
		t.Errorf("Decode =\n%+v\nwant\n%+v", m, golden())
	}
}

// checkRoundTrip: a manifest Decode accepted is valid, encodes, and
// decodes back to an equal manifest.
func checkRoundTrip(t *testing.T, m *manifest.Manifest) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatalf("Decode accepted a manifest Validate refuses: %v", err)
	}
	data, err := m.Encode()
	if err != nil {
		t.Fatalf("Decode accepted a manifest Encode refuses: %v", err)
	}
	again, err := manifest.Decode(data)
	if err != nil {
		t.Fatalf("Decode(Encode(m)): %v\n%s", err, data)
	}
	if !reflect.DeepEqual(again, m) {
		t.Fatalf("round trip differs:\n%+v\n%+v", again, m)
	}
}
