package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/stateexport"
	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
	"github.com/weirstream/weir/statestore/statefile"
)

// fileColumn is the column state dump adds before the state's own: the
// state file a row comes from. Operator state columns are never named so
// (names start with a letter).
const fileColumn = "_file"

func (a *app) stateCmd() *cobra.Command {
	st := &cobra.Command{
		Use:   "state",
		Short: "Read the operator state in a job's checkpoints",
		// -o table is state dump's name for the text output.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if f := cmd.Flags().Lookup("output"); f != nil && f.Value.String() == "table" {
				if err := cmd.Flags().Set("output", "text"); err != nil {
					return err
				}
			}
			return a.loadConfig(cmd)
		},
	}
	st.AddCommand(a.stateDumpCmd(), a.stateExportCmd())
	return st
}

func (a *app) stateDumpCmd() *cobra.Command {
	var operator, key string
	var limit int
	cmd := &cobra.Command{
		Use:   "dump JOB N --operator NAME",
		Short: "Print an operator's state rows in checkpoint N",
		Long: `Print the state of one operator in checkpoint N of a job, read from the
store: the state files the manifest lists for the operator (every subtask),
in the order a restore applies them (per subtask a base, then its deltas),
each checked against the manifest's size and SHA-256 and decoded as a
restore decodes it. Every row is printed with the file it comes from (column
_file) and the columns of the operator's state schema, as a table
(-o table, the default) or as JSON lines (-o json).

The first column of every state file is key_group; the others are the
operator's. A window operator's state has its keyBy columns next, then its
windows and accumulators; a function operator's state has a row per table
entry or timer, with the key in the binary column key.

Keys. --key K keeps the rows whose key, rendered as text, is K. A key is
the values of the operator's keyBy columns, each rendered as: a string as
it is, an integer in decimal, a float in Go's shortest form (2.5, 1e+21),
true or false, a timestamp in RFC 3339 UTC with milliseconds
(2026-01-01T00:00:00.000Z), null as null; the values of a key of several
columns are joined with "," in keyBy order (--key downtown,3).

Window state holds the key columns themselves. A function's state holds
the key in the binary column key, in arrowfmt's key encoding
(arrowfmt.KeyString): it is decoded (arrowfmt.DecodeKeyString) with the
types of the operator's keyBy columns, planned from jobs/<job>/spec.json,
and printed rendered as above. When the spec does not plan in this binary
(a function it was not built with), keys print as 0x and the hex of the
encoding, and --key compares with that.

Binary values (a function state's value) print as text when they are
printable UTF-8 (the JSON of a struct state), else as 0x and their hex.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseCheckpointID(args[1])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if limit < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--limit %d: want 0 (all rows) or more", limit)}
			}
			return a.dumpState(cmd.Context(), args[0], n, operator, key, cmd.Flags().Changed("key"), limit)
		},
	}
	cmd.Flags().StringVar(&operator, "operator", "", "operator whose state to print (required)")
	_ = cmd.MarkFlagRequired("operator")
	cmd.Flags().StringVar(&key, "key", "", "print only the rows of this key, rendered as text (see above)")
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most this many rows (0: all)")
	return cmd
}

func (a *app) dumpState(ctx context.Context, job string, n int64, operator, key string, filter bool, limit int) error {
	b, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	m, _, err := readManifest(ctx, b, job, n)
	if err != nil {
		return err
	}
	files, err := operatorFiles(m, operator)
	if err != nil {
		return err
	}
	keys := a.stateKeysOf(ctx, b, job, operator)
	var out rowWriter
	if a.v.GetString("output") == "json" {
		out = &jsonRows{w: a.stdout}
	} else {
		out = &tableRows{tw: tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0), prefix: layout.OperatorStatePrefix(job, operator)}
	}
	rows := 0
	read := 0
	_, stores := task.SplitStoreFiles(files)
	dumped := map[[2]int]bool{} // stores dumped, by key group range
	for _, f := range files {
		if limit > 0 && rows >= limit {
			break
		}
		name := f.Segment()
		scan := func(rec arrow.RecordBatch) (bool, error) {
			kc, err := keys.bind(rec.Schema())
			if err != nil && filter {
				return false, fmt.Errorf("--key: %w", err)
			}
			for r := range int(rec.NumRows()) {
				k, ok := kc.render(rec, r)
				if filter && (!ok || k != key) {
					continue
				}
				if err := out.row(name, rec, r, kc); err != nil {
					return false, err
				}
				if rows++; limit > 0 && rows >= limit {
					return false, nil
				}
			}
			return true, nil
		}
		if f.Kind == manifest.KindStore {
			// A store captured as files: its entries, as a base of rows.
			kr := [2]int{f.KeyGroupStart, f.KeyGroupEnd}
			if dumped[kr] {
				continue
			}
			dumped[kr] = true
			for _, group := range stores {
				if group[0].KeyGroupStart == kr[0] && group[0].KeyGroupEnd == kr[1] {
					name = fmt.Sprintf("store %d-%d (%d files)", kr[0], kr[1], len(group))
					scanStore := scanStore
					if keys.stores != nil {
						// A window or join on pebble: its state, as
						// the heap's operator's.
						scanStore = func(ctx context.Context, b blob.BucketReader, files []manifest.File, fn func(arrow.RecordBatch) (bool, error)) error {
							return stateexport.StoreRows(ctx, stateexport.Request{Bucket: b, Plan: keys.stores, Operator: operator}, files, fn)
						}
					}
					if err := scanStore(ctx, b, group, scan); err != nil {
						return fmt.Errorf("operator %s: store of key groups [%d, %d): %w", operator, kr[0], kr[1], err)
					}
					read += len(group)
				}
			}
			continue
		}
		data, err := readStateFile(ctx, b, f)
		if err != nil {
			return err
		}
		read++
		if err := scanStateFile(data, scan); err != nil {
			return fmt.Errorf("state file %s: %w", f.Segment(), err)
		}
	}
	if err := out.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "weir: %d rows from %d of %d state files of operator %s in checkpoint %d\n", rows, read, len(files), operator, n)
	return nil
}

// operatorFiles returns the state files of operator in m, in apply order
// (vertex, subtask, then the subtask's order), each key once: after
// rescaling two subtasks may list one file.
func operatorFiles(m *manifest.Manifest, operator string) ([]manifest.File, error) {
	var files []manifest.File
	seen := map[string]bool{}
	var ops []string
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			for _, f := range s.State {
				if !seen["op:"+f.Operator] {
					seen["op:"+f.Operator] = true
					ops = append(ops, f.Operator)
				}
				if f.Operator == operator && !seen[f.Segment()] {
					seen[f.Segment()] = true
					files = append(files, f)
				}
			}
		}
	}
	if len(files) > 0 {
		return files, nil
	}
	if len(ops) == 0 {
		what := "no state files"
		if m.Final {
			what = "no state files: it is the final checkpoint, written when the job's input was complete"
		}
		return nil, fmt.Errorf("checkpoint %d of job %s has %s", m.Checkpoint, m.Job, what)
	}
	return nil, fmt.Errorf("checkpoint %d of job %s has no state of operator %q (operators with state: %s)", m.Checkpoint, m.Job, operator, strings.Join(ops, ", "))
}

// readStateFile reads a state file and checks it against its manifest
// entry.
func readStateFile(ctx context.Context, b blob.BucketReader, f manifest.File) ([]byte, error) {
	data, err := statefile.Read(ctx, b, f)
	var mm *statefile.MismatchError
	if errors.As(err, &mm) {
		return nil, fmt.Errorf("%w: the file is damaged or was replaced", err)
	}
	return data, err
}

// scanStore opens the store whose files are files, as a restore does
// (task.OpenStores), and calls fn with the batches of a full
// snapshot of its entries until fn returns false or an error.
func scanStore(ctx context.Context, b blob.BucketReader, files []manifest.File, fn func(arrow.RecordBatch) (bool, error)) error {
	m, closeStore, err := task.OpenStores(ctx, b, [][]manifest.File{files}, files[0].KeyGroupStart, files[0].KeyGroupEnd)
	if err != nil {
		return err
	}
	defer closeStore()
	batches, err := m.Snapshot(memory.DefaultAllocator, true)
	if err != nil {
		return err
	}
	return scanBatches(batches, fn)
}

// scanStateFile decodes a state file as a restore does (statefile.Decode)
// and calls fn with each batch until fn returns false or an error. The
// batch is valid during the call.
func scanStateFile(data []byte, fn func(arrow.RecordBatch) (bool, error)) error {
	_, batches, err := statefile.Decode(data, nil, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	return scanBatches(batches, fn)
}

// scanBatches calls fn with each batch until fn returns false or an
// error, and releases them.
func scanBatches(batches []arrow.RecordBatch, fn func(arrow.RecordBatch) (bool, error)) error {
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for _, rec := range batches {
		more, err := fn(rec)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// stateKeys knows where an operator's state rows keep the key.
type stateKeys struct {
	known bool     // the spec names the operator
	keyBy []string // its keyBy columns
	fn    bool     // a function operator: the key is the binary column "key"
	// types are the key columns' types, to decode a function state's
	// binary key; nil renders it as hex.
	types []arrowfmt.Type
	// stores is the job planned, for a window or join on pebble: its
	// stores are dumped as the heap operator's rows
	// (stateexport.StoreRows).
	stores *plan.Plan
}

// stateKeysOf reads what the job spec says of operator's keys. Without a
// spec, keys are found from the state schema alone (see bind).
func (a *app) stateKeysOf(ctx context.Context, b blob.BucketReader, job, operator string) *stateKeys {
	sk := &stateKeys{}
	js, err := loadJobSpec(ctx, b, job)
	if err != nil {
		fmt.Fprintf(a.stderr, "weir: %v: keys are found from the state's columns alone\n", err)
		return sk
	}
	for _, o := range js.Operators {
		if o.Name == operator {
			sk.known, sk.keyBy, sk.fn = true, o.KeyBy, o.Function != ""
			if (o.Window != nil || o.Join != nil) && js.State != nil && js.State.Backend == spec.StatePebble {
				if p, err := plan.Build(js); err == nil {
					sk.stores = p
				}
			}
		}
	}
	if !sk.fn {
		return sk
	}
	types, err := inputKeyTypes(js, operator)
	if err != nil {
		fmt.Fprintf(a.stderr, "weir: cannot decode the keys of operator %s: %v: keys print as 0x and the hex of their encoding\n", operator, err)
		return sk
	}
	sk.types = types
	return sk
}

// inputKeyTypes plans the job and returns the types of an operator's keyBy
// columns.
func inputKeyTypes(js *spec.Job, operator string) ([]arrowfmt.Type, error) {
	p, err := plan.Build(js)
	if err != nil {
		return nil, fmt.Errorf("plan the job spec: %w", err)
	}
	n := p.Node(operator)
	if n == nil || n.Input == nil {
		return nil, fmt.Errorf("the job spec has no operator %s", operator)
	}
	types := make([]arrowfmt.Type, 0, len(n.Input.KeyColumns))
	for _, c := range n.Input.KeyColumns {
		f := n.Input.Stream.Schema.Field(c)
		t, err := arrowfmt.TypeOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", f.Name, err)
		}
		types = append(types, t)
	}
	return types, nil
}

// keyCols is where the key is in one state schema.
type keyCols struct {
	typed  []int           // columns holding the key values (window state)
	binary int             // column holding the encoded key (function state), -1 for none
	types  []arrowfmt.Type // to decode the binary key; nil renders hex
}

// bind finds the key in a state schema. Without the spec: a binary column
// "key" next to a "table" column is a function state's encoded key; else the
// columns between key_group and "kind" are a window state's key.
func (sk *stateKeys) bind(s *arrow.Schema) (keyCols, error) {
	kc := keyCols{binary: -1}
	binKey := -1
	if idx := s.FieldIndices("key"); len(idx) == 1 && arrow.TypeEqual(s.Field(idx[0]).Type, arrow.BinaryTypes.Binary) {
		binKey = idx[0]
	}
	switch {
	case sk.fn || (!sk.known && binKey >= 0 && s.HasField("table")):
		if binKey < 0 {
			return kc, fmt.Errorf("the state has no binary column key (columns: %s)", fieldNames(s))
		}
		kc.binary, kc.types = binKey, sk.types
	case sk.known:
		if len(sk.keyBy) == 0 {
			return kc, fmt.Errorf("the operator has no keyBy: its state has no keys")
		}
		if s.NumFields() <= len(sk.keyBy) {
			return kc, fmt.Errorf("the state has %d columns (%s), too few for key_group and the keyBy columns %s", s.NumFields(), fieldNames(s), strings.Join(sk.keyBy, ", "))
		}
		for i := range sk.keyBy {
			kc.typed = append(kc.typed, 1+i)
		}
	default:
		idx := s.FieldIndices("kind")
		if len(idx) != 1 || idx[0] < 2 {
			return kc, fmt.Errorf("cannot tell the key columns of the state without the job spec (columns: %s)", fieldNames(s))
		}
		for i := 1; i < idx[0]; i++ {
			kc.typed = append(kc.typed, i)
		}
	}
	return kc, nil
}

// render renders row's key as --key compares it; ok is false when there
// is no key.
func (kc keyCols) render(rec arrow.RecordBatch, row int) (string, bool) {
	switch {
	case kc.binary >= 0:
		col := rec.Column(kc.binary)
		if col.IsNull(row) {
			return "", false
		}
		raw, _ := arrowfmt.Value(col, row).([]byte)
		return renderEncodedKey(raw, kc.types), true
	case len(kc.typed) > 0:
		parts := make([]string, len(kc.typed))
		for i, c := range kc.typed {
			parts[i] = renderValue(arrowfmt.Value(rec.Column(c), row))
		}
		return strings.Join(parts, ","), true
	}
	return "", false
}

// renderEncodedKey decodes an arrowfmt key encoding with the key columns'
// types and renders it; without the types, or if it does not decode, it is
// 0x and its hex.
func renderEncodedKey(raw []byte, types []arrowfmt.Type) string {
	if types != nil {
		if vals, err := arrowfmt.DecodeKeyString(string(raw), types); err == nil {
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = renderValue(v)
			}
			return strings.Join(parts, ",")
		}
	}
	return "0x" + hex.EncodeToString(raw)
}

// renderValue renders a value as text (see state dump's help).
func renderValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.UTC().Format("2006-01-02T15:04:05.000Z")
	case []byte:
		return renderBytes(v)
	}
	return fmt.Sprint(v)
}

// renderBytes renders printable UTF-8 as text, anything else as 0x and hex.
func renderBytes(b []byte) string {
	if utf8.Valid(b) && len(b) > 0 {
		printable := true
		for _, r := range string(b) {
			if !unicode.IsPrint(r) && r != ' ' {
				printable = false
				break
			}
		}
		if printable {
			return string(b)
		}
	}
	return "0x" + hex.EncodeToString(b)
}

// cell returns the value of a column in a row as state dump prints it:
// the encoded key rendered, binary values rendered, the rest as
// arrowfmt.Value gives them.
func cell(rec arrow.RecordBatch, col, row int, kc keyCols) any {
	if col == kc.binary {
		if k, ok := kc.render(rec, row); ok {
			return k
		}
		return nil
	}
	v := arrowfmt.Value(rec.Column(col), row)
	if b, ok := v.([]byte); ok {
		return renderBytes(b)
	}
	if name, ok := codeName(rec.Schema().Field(col), v); ok {
		return name
	}
	return v
}

// codeName returns the name of code v if field f names its codes in its
// metadata weir.codes ("0=replace,1=window,2=clear": a window state's
// kind).
func codeName(f arrow.Field, v any) (string, bool) {
	i := f.Metadata.FindKey("weir.codes")
	if i < 0 || v == nil {
		return "", false
	}
	code := fmt.Sprint(v)
	for pair := range strings.SplitSeq(f.Metadata.Values()[i], ",") {
		if c, name, ok := strings.Cut(pair, "="); ok && c == code {
			return name, true
		}
	}
	return "", false
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// rowWriter prints state rows.
type rowWriter interface {
	row(file string, rec arrow.RecordBatch, row int, kc keyCols) error
	flush() error
}

// tableRows prints a table, with a header whenever the schema changes.
type tableRows struct {
	tw     *tabwriter.Writer
	prefix string // trimmed from file keys
	schema *arrow.Schema
}

func (t *tableRows) row(file string, rec arrow.RecordBatch, row int, kc keyCols) error {
	if t.schema == nil || !t.schema.Equal(rec.Schema()) {
		if t.schema != nil {
			fmt.Fprintln(t.tw)
		}
		t.schema = rec.Schema()
		fmt.Fprint(t.tw, fileColumn)
		for _, f := range t.schema.Fields() {
			fmt.Fprint(t.tw, "\t", f.Name)
		}
		fmt.Fprintln(t.tw)
	}
	fmt.Fprint(t.tw, strings.TrimPrefix(file, t.prefix))
	for c := range int(rec.NumCols()) {
		s := renderValue(cell(rec, c, row, kc))
		if s == "" || strings.ContainsAny(s, "\t\n\r") {
			s = strconv.Quote(s) // an empty cell would look like a missing one
		}
		fmt.Fprint(t.tw, "\t", s)
	}
	_, err := fmt.Fprintln(t.tw)
	return err
}

func (t *tableRows) flush() error { return t.tw.Flush() }

// jsonRows prints one JSON object a row, with the columns in schema order.
type jsonRows struct {
	w   io.Writer
	buf []byte
}

func (j *jsonRows) row(file string, rec arrow.RecordBatch, row int, kc keyCols) error {
	j.buf = append(j.buf[:0], '{')
	j.buf = appendJSONField(j.buf, fileColumn, file)
	for c, f := range rec.Schema().Fields() {
		j.buf = append(j.buf, ',')
		j.buf = appendJSONField(j.buf, f.Name, jsonValue(cell(rec, c, row, kc)))
	}
	j.buf = append(j.buf, '}', '\n')
	_, err := j.w.Write(j.buf)
	return err
}

func (j *jsonRows) flush() error { return nil }

func appendJSONField(dst []byte, name string, v any) []byte {
	k, _ := json.Marshal(name)
	dst = append(dst, k...)
	dst = append(dst, ':')
	val, err := json.Marshal(v)
	if err != nil {
		val, _ = json.Marshal(fmt.Sprint(v))
	}
	return append(dst, val...)
}

// jsonValue makes a value JSON can hold: times as text, NaN and the
// infinities as text.
func jsonValue(v any) any {
	switch v := v.(type) {
	case time.Time:
		return renderValue(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return v
}
