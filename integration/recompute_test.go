package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/statestore/blob"
)

// row is one output or expected row: column name -> value (int64,
// float64, string, bool, or nil), timestamps as int64 milliseconds.
type row map[string]any

// genInput generates a datagen source's whole input, as the source would,
// with columns by name.
func genInput(t *testing.T, job *spec.Job, source string) []row {
	t.Helper()
	var src *spec.Source
	for i := range job.Sources {
		if job.Sources[i].Name == source {
			src = &job.Effective().Sources[i]
		}
	}
	if src == nil {
		t.Fatalf("no source %q", source)
	}
	st, err := connector.SourceSchema(src)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]row, 0, src.Count)
	gen := datagen.NewRows(src, st)
	var vals []any
	for i := int64(0); i < src.Count; i++ {
		vals = gen.Row(i, vals[:0])
		r := row{}
		for c, f := range st.Schema.Fields() {
			r[f.Name] = normalize(vals[c])
		}
		rows = append(rows, r)
	}
	return rows
}

func normalize(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UnixMilli()
	case int:
		return int64(x)
	}
	return v
}

// aggSpec is one aggregate of a window: fn over col ("" for count()).
type aggSpec struct{ name, fn, col string }

func parseAggs(t *testing.T, m *spec.OrderedMap) []aggSpec {
	var out []aggSpec
	for i, name := range m.Keys {
		e := strings.ReplaceAll(m.Values[i], " ", "")
		fn, rest, ok := strings.Cut(e, "(")
		if !ok {
			t.Fatalf("bad aggregate %q", e)
		}
		out = append(out, aggSpec{name: name, fn: fn, col: strings.TrimSuffix(rest, ")")})
	}
	return out
}

// recomputeWindows computes what a window operator must output, the
// straightforward way: assign every row to its windows, group by window and
// key, aggregate. Sessions merge the way Flink's do (windows that overlap or
// touch are merged).
func recomputeWindows(t *testing.T, op *spec.Operator, timeCol string, input []row) []row {
	t.Helper()
	w := op.Window
	aggs := parseAggs(t, op.Aggregate)
	type group struct {
		start, end int64
		key        []any
		rows       []row
	}
	keyOf := func(r row) string {
		parts := make([]string, len(op.KeyBy))
		for i, k := range op.KeyBy {
			parts[i] = fmt.Sprintf("%v", r[k])
		}
		return strings.Join(parts, "\x00")
	}
	groups := map[string]*group{}
	add := func(start, end int64, r row) {
		id := fmt.Sprintf("%d|%d|%s", start, end, keyOf(r))
		g := groups[id]
		if g == nil {
			g = &group{start: start, end: end}
			for _, k := range op.KeyBy {
				g.key = append(g.key, r[k])
			}
			groups[id] = g
		}
		g.rows = append(g.rows, r)
	}
	floorDiv := func(a, b int64) int64 {
		q := a / b
		if a%b != 0 && a < 0 {
			q--
		}
		return q
	}
	switch w.Type {
	case spec.WindowTumbling:
		size := w.Size.D().Milliseconds()
		for _, r := range input {
			ts := r[timeCol].(int64)
			s := floorDiv(ts, size) * size
			add(s, s+size, r)
		}
	case spec.WindowSliding:
		size, slide := w.Size.D().Milliseconds(), w.Slide.D().Milliseconds()
		for _, r := range input {
			ts := r[timeCol].(int64)
			for s := floorDiv(ts, slide) * slide; s > ts-size; s -= slide {
				add(s, s+size, r)
			}
		}
	case spec.WindowSession:
		gap := w.Gap.D().Milliseconds()
		byKey := map[string][]row{}
		for _, r := range input {
			byKey[keyOf(r)] = append(byKey[keyOf(r)], r)
		}
		for _, rs := range byKey {
			sort.SliceStable(rs, func(i, j int) bool { return rs[i][timeCol].(int64) < rs[j][timeCol].(int64) })
			var cur []row
			var start, end int64
			for _, r := range rs {
				ts := r[timeCol].(int64)
				if len(cur) > 0 && ts <= end {
					cur = append(cur, r)
					end = max(end, ts+gap)
					continue
				}
				for _, c := range cur {
					add(start, end, c)
				}
				cur, start, end = []row{r}, ts, ts+gap
			}
			for _, c := range cur {
				add(start, end, c)
			}
		}
	default:
		t.Fatalf("window type %q", w.Type)
	}
	var out []row
	for _, g := range groups {
		r := row{"window_start": g.start, "window_end": g.end}
		for i, k := range op.KeyBy {
			r[k] = g.key[i]
		}
		for _, a := range aggs {
			r[a.name] = aggregate(a, g.rows)
		}
		out = append(out, r)
	}
	return out
}

func aggregate(a aggSpec, rows []row) any {
	if a.fn == "count" && a.col == "" {
		return int64(len(rows))
	}
	var n int64
	var sumF float64
	var sumI int64
	var best any
	isInt := false
	for _, r := range rows {
		v := r[a.col]
		if v == nil {
			continue
		}
		n++
		switch x := v.(type) {
		case int64:
			isInt = true
			sumI += x
			sumF += float64(x)
			if best == nil || (a.fn == "min" && x < best.(int64)) || (a.fn == "max" && x > best.(int64)) {
				best = x
			}
		case float64:
			sumF += x
			if best == nil || (a.fn == "min" && x < best.(float64)) || (a.fn == "max" && x > best.(float64)) {
				best = x
			}
		}
	}
	switch a.fn {
	case "count":
		return n
	case "sum":
		if n == 0 {
			return nil
		}
		if isInt {
			return sumI
		}
		return sumF
	case "avg":
		if n == 0 {
			return nil
		}
		return sumF / float64(n)
	}
	return best // min, max
}

// readOutput reads every object under prefix (JSON lines or Parquet) into
// rows, with timestamps as milliseconds.
func readOutput(t testing.TB, b blob.BucketReader, prefix string) []row {
	t.Helper()
	ctx := context.Background()
	objs, err := b.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, o := range objs {
		if strings.Contains(o.Key, "/_staging/") {
			continue // not committed (the chaos tests check none is left)
		}
		data, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(o.Key, ".jsonl"):
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			for {
				var r row
				if err := dec.Decode(&r); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("%s, row %d: %v", o.Key, len(out), err)
				}
				for k, v := range r {
					r[k] = jsonValue(v)
				}
				out = append(out, r)
			}
		case strings.HasSuffix(o.Key, ".parquet"):
			out = append(out, readParquet(t, o.Key, data)...)
		default:
			t.Fatalf("unexpected output object %s", o.Key)
		}
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(x.String(), ".eE") {
			return i
		}
		f, _ := x.Float64()
		return f
	case string:
		if ts, err := time.Parse(time.RFC3339Nano, x); err == nil && len(x) >= 20 && x[10] == 'T' {
			return ts.UnixMilli()
		}
	}
	return v
}

func readParquet(t testing.TB, key string, data []byte) []row {
	t.Helper()
	mem := memory.NewGoAllocator()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	var out []row
	for c := 0; c < int(tbl.NumCols()); c++ {
		col := tbl.Column(c)
		i := 0
		for _, chunk := range col.Data().Chunks() {
			for r := 0; r < chunk.Len(); r++ {
				if c == 0 {
					out = append(out, row{})
				}
				out[i][col.Name()] = normalize(arrowfmt.Value(chunk, r))
				i++
			}
		}
	}
	return out
}

// compareRows checks that got equals want as multisets of rows: every
// non-float value exactly, floats within 1e-9 relative (sums are added in
// another order).
func compareRows(t *testing.T, what string, got, want []row) {
	t.Helper()
	// Rows are matched by their non-float values; floats are compared
	// with a tolerance after matching.
	ident := func(r row) string {
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b []byte
		for _, k := range keys {
			b = append(append(b, k...), '=')
			switch v := r[k].(type) {
			case float64:
				b = append(b, "<f>"...)
			case int64: // most values: without fmt, which millions of rows feel
				b = strconv.AppendInt(b, v, 10)
			case string:
				b = append(b, v...)
			default:
				b = fmt.Append(b, v)
			}
			b = append(b, ';')
		}
		return string(b)
	}
	// JSON writes a whole float without a fraction: read such a number
	// as a float where the expected column is one.
	floatCol := map[string]bool{}
	for _, r := range want {
		for k, v := range r {
			if _, ok := v.(float64); ok {
				floatCol[k] = true
			}
		}
	}
	for _, r := range got {
		for k, v := range r {
			if i, ok := v.(int64); ok && floatCol[k] {
				r[k] = float64(i)
			}
		}
	}
	pending := map[string][]row{}
	for _, r := range want {
		id := ident(r)
		pending[id] = append(pending[id], r)
	}
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 8 {
			t.Errorf(what+": "+format, args...)
		}
	}
	for _, g := range got {
		id := ident(g)
		cands := pending[id]
		matched := -1
		for i, w := range cands {
			if floatsEqual(g, w) {
				matched = i
				break
			}
		}
		if matched < 0 {
			if len(cands) > 0 {
				report("row %v differs in a float from expected %v", g, cands[0])
			} else {
				report("unexpected row %v", g)
			}
			continue
		}
		pending[id] = append(cands[:matched], cands[matched+1:]...)
	}
	for _, rs := range pending {
		for _, r := range rs {
			report("missing row %v", r)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
	if bad == 0 && len(got) == len(want) {
		t.Logf("%s: %d rows equal the batch recomputation", what, len(got))
	} else if bad > 8 {
		t.Errorf("%s: %d differences in all", what, bad)
	}
}

func floatsEqual(a, b row) bool {
	for k, v := range a {
		fa, ok := v.(float64)
		if !ok {
			continue
		}
		fb, ok := b[k].(float64)
		if !ok || math.Abs(fa-fb) > 1e-9*math.Max(1, math.Max(math.Abs(fa), math.Abs(fb))) {
			return false
		}
	}
	return true
}
