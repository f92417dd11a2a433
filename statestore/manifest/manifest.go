package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// Version is the newest manifest format this package reads and writes. It
// changes only for changes an older reader would misread; optional fields
// that an older reader may ignore do not bump it. A manifest is written
// at the lowest version that holds it (LowestVersion): version 2 added
// store files (KindStore), so a manifest without any is still version 1,
// and one with them is refused by a binary from before them as too new
// (ErrUnsupportedVersion), not as corrupt, which would have made it fall
// back to an older checkpoint. Version 3 added state files with narrowed
// columns (File.Narrowed), which a binary from before them cannot read.
const Version = 3

// LowestVersion returns the lowest version that holds m: 3 if it lists a
// narrowed state file, 2 if it lists a store file, else 1.
func (m *Manifest) LowestVersion() int {
	v := 1
	for _, vx := range m.Vertices {
		for _, s := range vx.Subtasks {
			for _, f := range s.State {
				switch {
				case f.Narrowed:
					return 3
				case f.Kind == KindStore:
					v = 2
				}
			}
		}
	}
	return v
}

// MaxMaxParallelism is the largest maxParallelism a job can have (the job
// spec's limit).
const MaxMaxParallelism = 32768

var (
	// ErrCorrupt is wrapped by every Decode error except a newer version: the
	// manifest is truncated, not JSON, or breaks the format's rules. Restore
	// treats the checkpoint as unusable and falls back to the previous one.
	ErrCorrupt = errors.New("manifest: corrupt")
	// ErrUnsupportedVersion is returned by Decode for a manifest written by a
	// newer weir. It does not wrap ErrCorrupt: the checkpoint is fine, this
	// binary is too old for it, and falling back to an older checkpoint would
	// redo work that sinks have already committed.
	ErrUnsupportedVersion = errors.New("manifest: unsupported version")
)

// Kinds of state files.
const (
	KindBase  = "base"  // a full snapshot of an operator's key groups
	KindDelta = "delta" // changes since the previous file for the same operator and range
	// KindStore is a file of an operator's store captured as files (a
	// pebble database's sstable or MANIFEST), at File.Name in its
	// directory: a subtask lists every file of its store's capture,
	// sharing the unchanged ones with earlier checkpoints.
	KindStore = "store"
)

// Manifest is the commit point of one checkpoint or savepoint: every file,
// source position and pre-committed sink transaction needed to restore the
// job as it was at the barrier. See docs/checkpoint-format.md.
type Manifest struct {
	Version    int    `json:"version"`    // Version
	Job        string `json:"job"`        // job id, e.g. "rides-0a1b2c3d"
	Checkpoint int64  `json:"checkpoint"` // checkpoint id, > 0
	Attempt    int    `json:"attempt"`    // attempt that took it, >= 1
	// Epoch is the leader epoch of the coordinator that wrote it (0: a
	// coordinator without a lease). A manifest a deposed leader wrote
	// after a newer one took the job over is skipped on restore.
	Epoch int64 `json:"epoch,omitempty"`
	// Savepoint marks a manifest under layout.SavepointPrefix,
	// triggered by a user and never deleted by retention.
	Savepoint bool `json:"savepoint,omitempty"`
	// Final marks the manifest written when every subtask finished its
	// bounded input: it holds the last sink transactions and no state to
	// restore; once it is written the job's output is complete.
	Final     bool      `json:"final,omitempty"`
	Triggered time.Time `json:"triggered"` // when the coordinator started it (UTC)
	Completed time.Time `json:"completed"` // when the last subtask acknowledged (UTC)
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int `json:"maxParallelism"`
	// SpecSHA256 is the lowercase hex SHA-256 of jobs/<job>/spec.json, the
	// spec this checkpoint's state was written for.
	SpecSHA256 string   `json:"specSha256"`
	Vertices   []Vertex `json:"vertices"` // sorted by name (byte order), at least one
}

// Vertex is the state of one vertex (an operator chain) at one parallelism.
type Vertex struct {
	Name string `json:"name"`
	// Keyed says the vertex holds keyed state: its subtasks' key group
	// ranges tile [0, maxParallelism) in index order. A vertex that is not
	// keyed has every range [0, 0).
	Keyed       bool      `json:"keyed,omitempty"`
	Parallelism int       `json:"parallelism"`
	Subtasks    []Subtask `json:"subtasks"` // exactly Parallelism, Subtasks[i].Index == i
}

// Subtask is one parallel instance of a vertex.
type Subtask struct {
	Index int `json:"index"`
	// KeyGroupStart and KeyGroupEnd are the half-open range of key groups
	// the subtask owned, [0, 0) for a vertex that is not keyed.
	KeyGroupStart int `json:"keyGroupStart"`
	KeyGroupEnd   int `json:"keyGroupEnd"`
	// State is every file to read to restore the subtask, in apply order:
	// for each operator and key group range a base, then its deltas.
	State []File `json:"state,omitempty"`
	// SourcePositions maps each source in the chain to its position, opaque
	// JSON that only the source reads.
	SourcePositions map[string]json.RawMessage `json:"sourcePositions,omitempty"`
	// SinkTransactions were pre-committed at the barrier; the coordinator
	// commits them after the manifest is written, and again on recovery.
	SinkTransactions []Txn `json:"sinkTransactions,omitempty"`
	// Watermark is the subtask's event time at the barrier (absent: none
	// yet). Restore starts event time there, so that records judged late
	// before a failure are judged the same after it.
	Watermark *int64         `json:"watermark,omitempty"`
	Metrics   SubtaskMetrics `json:"metrics"`
}

// File is one immutable state file. A file may be shared by several
// checkpoints, and after rescaling by several subtasks.
type File struct {
	Key      string `json:"key"`      // bucket key, layout.StateFileKey (or layout.SavepointStateKey)
	Size     int64  `json:"size"`     // bytes
	SHA256   string `json:"sha256"`   // lowercase hex of the content
	Kind     string `json:"kind"`     // KindBase or KindDelta
	Operator string `json:"operator"` // operator of the chain whose state it holds
	// KeyGroupStart and KeyGroupEnd are the half-open range of key groups
	// the file covers; it may be wider than the subtask's after rescaling
	// (the reader keeps its own groups). [0, 0) in a vertex that is not keyed.
	KeyGroupStart int `json:"keyGroupStart"`
	KeyGroupEnd   int `json:"keyGroupEnd"`
	// Packed says the file is one of several in the object Key (a state
	// object: layout.StateObjectKey, the files a worker's subtasks wrote
	// at one checkpoint): its Size bytes from Offset. Otherwise the
	// object is the file.
	Packed bool  `json:"packed,omitempty"`
	Offset int64 `json:"offset,omitempty"`
	// Name is a store file's name in its store's directory (KindStore
	// only): the files of one operator and key group range in a subtask
	// are one store's capture.
	Name string `json:"name,omitempty"`
	// Compression is how a store file's bytes are compressed in the
	// bucket: "zstd" (a zstd frame), or absent for none. Size and SHA256
	// are those of the bytes in the bucket.
	Compression string `json:"compression,omitempty"`
	// Narrowed says a base or delta file holds int64 or timestamp_ms
	// columns narrowed to fewer bytes (arrowfmt.NarrowSchema), which
	// statefile.Decode widens back; it needs manifest version 3.
	Narrowed bool `json:"narrowed,omitempty"`
}

// CompressZstd is File.Compression for a zstd frame.
const CompressZstd = "zstd"

// Segment names the bytes of a state file: its object and, for a packed
// file, where in it.
func (f File) Segment() string {
	if !f.Packed {
		return f.Key
	}
	return fmt.Sprintf("%s@%d", f.Key, f.Offset)
}

// Txn is a sink transaction pre-committed at the barrier.
type Txn struct {
	Sink   string          `json:"sink"`   // sink name in the chain
	ID     string          `json:"id"`     // unique per sink within the manifest
	Handle json.RawMessage `json:"handle"` // opaque JSON the sink commits or aborts with
}

// SubtaskMetrics is what the checkpoint cost one subtask.
type SubtaskMetrics struct {
	AlignMs int64 `json:"alignMs"` // from the first barrier to the last
	SyncMs  int64 `json:"syncMs"`  // the synchronous snapshot
	AsyncMs int64 `json:"asyncMs"` // the upload
	// CaptureMs is from the barrier until the state was captured:
	// state captured in steps beside processing takes StepMs at most
	// at a time (the task stops for a step); the rest is captured at
	// the barrier, within SyncMs.
	CaptureMs     int64 `json:"captureMs,omitempty"`
	StepMs        int64 `json:"stepMs,omitempty"`
	UploadedBytes int64 `json:"uploadedBytes"` // bytes of new files this checkpoint wrote
	// LastInput is the input channel whose barrier came last, completing
	// the alignment: the producing edge and subtask, "win[1]" (empty for
	// a source).
	LastInput string `json:"lastInput,omitempty"`
}

// nameRE is the job spec's rule for source, operator and sink names (and so
// vertex names); job ids follow layout.ValidJobID.
var (
	nameRE      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,62}$`)
	storeFileRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)
	sha256RE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Encode validates m and returns it as indented JSON with fields in a fixed
// order, times in UTC and a trailing newline. It does not change m.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	c := *m
	c.Triggered, c.Completed = c.Triggered.UTC(), c.Completed.UTC()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "<" readable, and opaque JSON byte for byte
	enc.SetIndent("", "  ")
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode reads a manifest strictly. It refuses, with an error wrapping
// ErrCorrupt: anything that is not one UTF-8 JSON object (a truncated
// manifest, trailing data), a missing or invalid version, unknown,
// duplicate, null or wrongly cased fields, and a manifest that does not
// pass Validate (the error then also holds Problems). A version newer than
// Version is refused with ErrUnsupportedVersion.
//
// Opaque JSON (source positions, transaction handles) comes back compacted,
// times in UTC, and empty lists and maps as nil, so that a decoded manifest
// encodes and decodes to an equal one.
func Decode(data []byte) (*Manifest, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrCorrupt)
	}
	// The version first: a newer manifest may not fit this package's shape.
	// (A map, unlike a struct, matches the name case-sensitively.)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, jsonError(data, err))
	}
	raw, ok := top["version"]
	if !ok {
		return nil, fmt.Errorf("%w: no version field", ErrCorrupt)
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < 1 {
		return nil, fmt.Errorf("%w: version: %s is not a format version: want an integer from 1 to %d", ErrCorrupt, raw, Version)
	}
	if v > Version {
		return nil, fmt.Errorf("%w: the manifest is version %d and this binary reads versions up to %d: restore it with a newer weir", ErrUnsupportedVersion, v, Version)
	}
	// encoding/json matches field names case-insensitively and lets a
	// repeated field win silently; check the shape exactly first.
	if err := checkShape(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, jsonError(data, err))
	}
	m.normalize()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return &m, nil
}

func jsonError(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &se) && se.Offset >= int64(len(data)) && len(data) > 0):
		return fmt.Sprintf("truncated JSON (%d bytes)", len(data))
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s: JSON %s where a %s belongs", te.Field, te.Value, te.Type)
	case errors.As(err, &te):
		return fmt.Sprintf("JSON %s where a manifest object belongs", te.Value)
	case errors.Is(err, io.EOF):
		return "empty"
	}
	return err.Error()
}

func (m *Manifest) normalize() {
	m.Triggered, m.Completed = m.Triggered.UTC(), m.Completed.UTC()
	for i := range m.Vertices {
		for j := range m.Vertices[i].Subtasks {
			s := &m.Vertices[i].Subtasks[j]
			if len(s.State) == 0 {
				s.State = nil
			}
			if len(s.SourcePositions) == 0 {
				s.SourcePositions = nil
			}
			for k, p := range s.SourcePositions {
				s.SourcePositions[k] = compact(p)
			}
			if len(s.SinkTransactions) == 0 {
				s.SinkTransactions = nil
			}
			for k := range s.SinkTransactions {
				s.SinkTransactions[k].Handle = compact(s.SinkTransactions[k].Handle)
			}
		}
	}
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw // Validate reports it
	}
	return b.Bytes()
}

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
)

// checkShape walks data against Manifest's JSON shape and returns the first
// field that is unknown, repeated, null, or of the wrong JSON kind. Field
// names are case-sensitive. Opaque values are only checked to be JSON.
func checkShape(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := shapeValue(dec, reflect.TypeFor[Manifest](), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the manifest object")
	}
	return nil
}

func shapeValue(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errors.New(jsonError(nil, err))
	}
	if t == rawType {
		return skipValue(dec, tok)
	}
	if tok == nil {
		return fmt.Errorf("%s: null is not allowed", orTop(path))
	}
	want := json.Delim(0)
	switch {
	case t.Kind() == reflect.Struct && t != timeType, t.Kind() == reflect.Map:
		want = '{'
	case t.Kind() == reflect.Slice:
		want = '['
	}
	if d, ok := tok.(json.Delim); (ok || want != 0) && d != want {
		return fmt.Errorf("%s: want %s", orTop(path), jsonKind(want, t))
	}
	if t == timeType {
		if s, ok := tok.(string); !ok {
			return fmt.Errorf("%s: want a string", path)
		} else if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("%s: %q is not an RFC 3339 time like 2026-01-01T00:01:00.5Z", path, s)
		}
	}
	switch want {
	case '[':
		for i := 0; dec.More(); i++ {
			if err := shapeValue(dec, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case '{':
		fields := map[string]reflect.Type{}
		if t.Kind() == reflect.Struct {
			for i := range t.NumField() {
				name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
				fields[name] = t.Field(i).Type
			}
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return errors.New(jsonError(nil, err))
			}
			key := tok.(string) // the decoder only allows string keys
			var fpath string
			var ft reflect.Type
			if t.Kind() == reflect.Struct {
				fpath = fieldPath(path, key)
				var known bool
				if ft, known = fields[key]; !known {
					return unknownField(fpath, key, fields)
				}
			} else {
				fpath, ft = fmt.Sprintf("%s[%q]", path, key), t.Elem()
			}
			if seen[key] {
				return fmt.Errorf("%s: repeated", fpath)
			}
			seen[key] = true
			if err := shapeValue(dec, ft, fpath); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // the closing delimiter
	if err != nil {
		return errors.New(jsonError(nil, err))
	}
	return nil
}

func fieldPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "manifest"
	}
	return path
}

func jsonKind(d json.Delim, t reflect.Type) string {
	switch {
	case d == '{':
		return "an object"
	case d == '[':
		return "an array"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String || t == timeType:
		return "a string"
	}
	return "a number"
}

func unknownField(path, key string, fields map[string]reflect.Type) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Errorf("%s: unknown field (names are case-sensitive: did you mean %q?)", path, name)
		}
	}
	names := slices.Sorted(maps.Keys(fields))
	return fmt.Errorf("%s: unknown field: want one of %s (fields from a newer weir are refused too)", path, strings.Join(names, ", "))
}

// skipValue consumes the rest of a value whose first token was tok.
func skipValue(dec *json.Decoder, tok json.Token) error {
	if _, ok := tok.(json.Delim); !ok {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return errors.New(jsonError(nil, err))
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// Problem is one broken rule: the field's JSON path and what is wrong with
// its value.
type Problem struct {
	Field string // e.g. vertices[1].subtasks[0].state[2].sha256
	Msg   string
}

func (p Problem) Error() string { return p.Field + ": " + p.Msg }

// Problems is every problem Validate found. It is an error.
type Problems []Problem

func (ps Problems) Error() string {
	if len(ps) == 1 {
		return ps[0].Error()
	}
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Error()
	}
	return fmt.Sprintf("%d problems:\n  %s", len(ps), strings.Join(msgs, "\n  "))
}

// Validate checks every rule of docs/checkpoint-format.md and returns all
// problems at once as Problems, or nil.
func (m *Manifest) Validate() error {
	var ps Problems
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if m.Version < 1 || m.Version > Version {
		add("version", "%d: want 1 to %d", m.Version, Version)
	}
	if !layout.ValidJobID(m.Job) {
		add("job", "%q is not a job id: want a letter then letters, digits, '-' or '_' (at most 72)", m.Job)
	}
	if m.Checkpoint <= 0 {
		add("checkpoint", "%d: want > 0", m.Checkpoint)
	}
	if m.Attempt < 1 {
		add("attempt", "%d: want >= 1", m.Attempt)
	}
	checkTime := func(field string, t time.Time) bool {
		if y := t.UTC().Year(); y < 1970 || y > 9999 {
			add(field, "%s: want a time from 1970 to 9999", t.Format(time.RFC3339Nano))
			return false
		}
		return true
	}
	if checkTime("triggered", m.Triggered) && checkTime("completed", m.Completed) && m.Completed.Before(m.Triggered) {
		add("completed", "%s is before triggered (%s)", m.Completed.Format(time.RFC3339Nano), m.Triggered.Format(time.RFC3339Nano))
	}
	maxP := m.MaxParallelism
	if maxP < 1 || maxP > MaxMaxParallelism {
		add("maxParallelism", "%d: want 1..%d", maxP, MaxMaxParallelism)
		maxP = 0 // skip the checks that depend on it
	}
	if !sha256RE.MatchString(m.SpecSHA256) {
		add("specSha256", "%q: want 64 lowercase hex digits", m.SpecSHA256)
	}
	if len(m.Vertices) == 0 {
		add("vertices", "empty: want at least one vertex")
	}
	txnIDs := map[[2]string]string{} // sink, id -> field of first use
	files := map[string]File{}       // key -> first reference
	fileField := map[string]string{}
	for i := range m.Vertices {
		v := &m.Vertices[i]
		vf := fmt.Sprintf("vertices[%d]", i)
		if !nameRE.MatchString(v.Name) {
			add(vf+".name", "%q is not a vertex name: want a letter then letters, digits, '-' or '_' (at most 63)", v.Name)
		}
		if i > 0 && v.Name <= m.Vertices[i-1].Name {
			add(vf+".name", "%q after %q: want vertices sorted by name, each once", v.Name, m.Vertices[i-1].Name)
		}
		if v.Parallelism < 1 || (maxP > 0 && v.Parallelism > maxP) {
			add(vf+".parallelism", "%d: want 1..maxParallelism (%d)", v.Parallelism, m.MaxParallelism)
		}
		if len(v.Subtasks) != v.Parallelism {
			add(vf+".subtasks", "%d subtasks: want one per parallel instance (parallelism %d)", len(v.Subtasks), v.Parallelism)
		}
		for j := range v.Subtasks {
			s := &v.Subtasks[j]
			sf := fmt.Sprintf("%s.subtasks[%d]", vf, j)
			if s.Index != j {
				add(sf+".index", "%d: want %d (subtasks sorted by index, 0 to parallelism-1)", s.Index, j)
			}
			switch {
			case !v.Keyed:
				if s.KeyGroupStart != 0 || s.KeyGroupEnd != 0 {
					add(sf+".keyGroupStart", "[%d, %d): want [0, 0) in a vertex that is not keyed", s.KeyGroupStart, s.KeyGroupEnd)
				}
			case maxP == 0:
			default:
				want := 0
				if j > 0 {
					want = v.Subtasks[j-1].KeyGroupEnd
				}
				if s.KeyGroupStart != want {
					add(sf+".keyGroupStart", "%d: want %d (ranges tile [0, maxParallelism) in index order)", s.KeyGroupStart, want)
				}
				if s.KeyGroupEnd <= s.KeyGroupStart || s.KeyGroupEnd > maxP {
					add(sf+".keyGroupEnd", "%d: want more than keyGroupStart (%d) and at most maxParallelism (%d)", s.KeyGroupEnd, s.KeyGroupStart, maxP)
				}
				if j == len(v.Subtasks)-1 && s.KeyGroupEnd != maxP {
					add(sf+".keyGroupEnd", "%d: the last subtask's range must end at maxParallelism (%d)", s.KeyGroupEnd, maxP)
				}
			}
			based := map[string][][2]int{} // per operator, the key group ranges of its bases so far
			inSubtask := map[string]bool{}
			storeNames := map[[4]string]bool{} // operator, range, name
			for k, f := range s.State {
				ff := fmt.Sprintf("%s.state[%d]", sf, k)
				if err := blob.ValidateKey(f.Key); err != nil {
					add(ff+".key", "%q: want a relative bucket key (%s)", f.Key, strings.TrimPrefix(strings.TrimSuffix(err.Error(), ": "+blob.ErrInvalidKey.Error()), fmt.Sprintf("key %q: ", f.Key)))
				} else if seg := f.Segment(); inSubtask[seg] {
					add(ff+".key", "%q: listed twice in one subtask", seg)
				} else if first, ok := files[seg]; ok && (first.Size != f.Size || first.SHA256 != f.SHA256) {
					add(ff+".key", "%q: size %d and sha256 %s differ from %s (size %d, sha256 %s)", seg, f.Size, f.SHA256, fileField[seg], first.Size, first.SHA256)
				} else if !ok {
					files[seg], fileField[seg] = f, ff
				}
				inSubtask[f.Segment()] = true
				if f.Size < 0 {
					add(ff+".size", "%d: want >= 0", f.Size)
				}
				if f.Offset < 0 || (f.Offset != 0 && !f.Packed) {
					add(ff+".offset", "%d: want >= 0, and 0 in a file that is not packed", f.Offset)
				}
				if !sha256RE.MatchString(f.SHA256) {
					add(ff+".sha256", "%q: want 64 lowercase hex digits", f.SHA256)
				}
				if !nameRE.MatchString(f.Operator) {
					add(ff+".operator", "%q is not an operator name: want a letter then letters, digits, '-' or '_' (at most 63)", f.Operator)
				}
				switch {
				case !v.Keyed:
					if f.KeyGroupStart != 0 || f.KeyGroupEnd != 0 {
						add(ff+".keyGroupStart", "[%d, %d): want [0, 0) in a vertex that is not keyed", f.KeyGroupStart, f.KeyGroupEnd)
					}
				case maxP == 0:
				case f.KeyGroupStart < 0 || f.KeyGroupStart >= f.KeyGroupEnd || f.KeyGroupEnd > maxP:
					add(ff+".keyGroupStart", "[%d, %d): want a non-empty range within [0, maxParallelism (%d))", f.KeyGroupStart, f.KeyGroupEnd, maxP)
				case f.KeyGroupEnd <= s.KeyGroupStart || f.KeyGroupStart >= s.KeyGroupEnd:
					add(ff+".keyGroupStart", "[%d, %d) does not overlap the subtask's key groups [%d, %d)", f.KeyGroupStart, f.KeyGroupEnd, s.KeyGroupStart, s.KeyGroupEnd)
				}
				r := [2]int{f.KeyGroupStart, f.KeyGroupEnd}
				if f.Kind != KindStore && f.Name != "" {
					add(ff+".name", "%q: only a file of kind %q has a name", f.Name, KindStore)
				}
				switch {
				case f.Narrowed && f.Kind == KindStore:
					add(ff+".narrowed", "true: a file of kind %q is not an Arrow file", KindStore)
				case f.Narrowed && m.Version < 3:
					add(ff+".narrowed", "true: a narrowed file needs manifest version 3, and the manifest is version %d", m.Version)
				}
				if f.Compression != "" && (f.Kind != KindStore || f.Compression != CompressZstd) {
					add(ff+".compression", "%q: want %q, in a file of kind %q only", f.Compression, CompressZstd, KindStore)
				}
				switch f.Kind {
				case KindStore:
					if m.Version < 2 {
						add(ff+".kind", "%q: a store file needs manifest version 2, and the manifest is version %d", f.Kind, m.Version)
					}
					sk := [4]string{f.Operator, fmt.Sprint(f.KeyGroupStart), fmt.Sprint(f.KeyGroupEnd), f.Name}
					switch {
					case !storeFileRE.MatchString(f.Name) || f.Name == "." || f.Name == "..":
						add(ff+".name", "%q is not a store file's name: want a letter or digit then letters, digits, '.', '_' or '-' (at most 128)", f.Name)
					case storeNames[sk]:
						add(ff+".name", "%q: listed twice for operator %q, key groups [%d, %d)", f.Name, f.Operator, f.KeyGroupStart, f.KeyGroupEnd)
					}
					storeNames[sk] = true
				case KindBase:
					based[f.Operator] = append(based[f.Operator], r)
				case KindDelta:
					if !covered(r, based[f.Operator]) {
						add(ff+".kind", "delta for operator %q, key groups [%d, %d) before any base for them: want a base first", f.Operator, f.KeyGroupStart, f.KeyGroupEnd)
					}
				default:
					add(ff+".kind", "%q: want %q, %q or %q", f.Kind, KindBase, KindDelta, KindStore)
				}
			}
			for _, src := range slices.Sorted(maps.Keys(s.SourcePositions)) {
				pf := fmt.Sprintf("%s.sourcePositions[%q]", sf, src)
				if !nameRE.MatchString(src) {
					add(pf, "%q is not a source name: want a letter then letters, digits, '-' or '_' (at most 63)", src)
				}
				if p := s.SourcePositions[src]; !isJSONValue(p) {
					add(pf, "%q: want a JSON value other than null", p)
				}
			}
			for k, t := range s.SinkTransactions {
				tf := fmt.Sprintf("%s.sinkTransactions[%d]", sf, k)
				if !nameRE.MatchString(t.Sink) {
					add(tf+".sink", "%q is not a sink name: want a letter then letters, digits, '-' or '_' (at most 63)", t.Sink)
				}
				if t.ID == "" {
					add(tf+".id", "empty: want the transaction's id")
				} else if first, dup := txnIDs[[2]string{t.Sink, t.ID}]; dup {
					add(tf+".id", "%q: sink %q already has this transaction at %s", t.ID, t.Sink, first)
				} else {
					txnIDs[[2]string{t.Sink, t.ID}] = tf
				}
				if !isJSONValue(t.Handle) {
					add(tf+".handle", "%q: want a JSON value other than null", t.Handle)
				}
			}
			mf := sf + ".metrics"
			for _, x := range []struct {
				name string
				v    int64
			}{{"alignMs", s.Metrics.AlignMs}, {"syncMs", s.Metrics.SyncMs}, {"asyncMs", s.Metrics.AsyncMs}, {"uploadedBytes", s.Metrics.UploadedBytes}} {
				if x.v < 0 {
					add(mf+"."+x.name, "%d: want >= 0", x.v)
				}
			}
		}
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

// covered reports whether the key group range r is within the union of
// ranges: a delta applies on top of the bases before it, which may be cut
// into parts (one file per key group range) or, after a rescale, be wider.
func covered(r [2]int, ranges [][2]int) bool {
	for pos := r[0]; pos < r[1]; {
		next := pos
		for _, b := range ranges {
			if b[0] <= pos && pos < b[1] {
				next = max(next, b[1])
			}
		}
		if next == pos {
			return false
		}
		pos = next
	}
	return true
}

func isJSONValue(raw json.RawMessage) bool {
	return json.Valid(raw) && string(bytes.TrimSpace(raw)) != "null" && utf8.Valid(raw)
}

// Files returns the key of every state file m references, sorted, each
// once: what garbage collection must keep while m is retained.
func (m *Manifest) Files() []string {
	var keys []string
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			for _, f := range s.State {
				keys = append(keys, f.Key)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
