package arrowfmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestJSONDecoderAppend(t *testing.T) {
	mem := newMem(t)
	d := NewJSONDecoder(testSchema(t), mem)
	defer d.Release()
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)
	ms := strconv.FormatInt(ts.UnixMilli(), 10)
	cases := []struct {
		line string
		want []any
	}{
		{`{"id": 1, "name": "a", "price": 2.5, "ts": "2024-01-02T03:04:05.006Z", "ok": true}`, []any{int64(1), "a", 2.5, ts, true}},
		{`{"ts": ` + ms + `, "id": -7, "ok": false}`, []any{int64(-7), nil, nil, ts, false}},
		{`{}`, []any{nil, nil, nil, nil, nil}},
		{` {"id": null, "name": null, "price": null, "ts": null, "ok": null} ` + "\r", []any{nil, nil, nil, nil, nil}},
		{`{"id": 3.0, "price": 3}`, []any{int64(3), nil, 3.0, nil, nil}},
		{`{"id": 1.5e1, "price": -1E-2}`, []any{int64(15), nil, -0.01, nil, nil}},
		{`{"id": 9223372036854775807}`, []any{int64(math.MaxInt64), nil, nil, nil, nil}},
		{`{"id": -9223372036854775808}`, []any{int64(math.MinInt64), nil, nil, nil, nil}},
		{`{"id": 1, "id": 2}`, []any{int64(2), nil, nil, nil, nil}},
		{`{"id": 1, "id": null}`, []any{nil, nil, nil, nil, nil}},
		{`{"name": "tab\there \"q\" \u00e9 \ud83d\ude00 \/"}`, []any{nil, "tab\there \"q\" é 😀 /", nil, nil, nil}},
		{`{"n\u0061me": "escaped key"}`, []any{nil, "escaped key", nil, nil, nil}},
		{`{"name": "ünïcödé"}`, []any{nil, "ünïcödé", nil, nil, nil}},
		{"{\"name\": \"bad \xff utf8\"}", []any{nil, "bad \ufffd utf8", nil, nil, nil}},
		{`{"extra": {"a": [1, {"b": null}], "c": "d"}, "more": [], "id": 4, "x": -0.5e-3}`, []any{int64(4), nil, nil, nil, nil}},
		{`{"ts": "2024-01-02T04:04:05.006+01:00"}`, []any{nil, nil, nil, ts, nil}},
		{`{"ts": "2024-01-02T03:04:05.0069Z"}`, []any{nil, nil, nil, ts, nil}},
		{`{"ts": 1.704164645006e12}`, []any{nil, nil, nil, ts, nil}},
	}
	var want [][]any
	for _, c := range cases {
		if err := d.Append([]byte(c.line)); err != nil {
			t.Errorf("Append(%s): %v", c.line, err)
			continue
		}
		want = append(want, c.want)
	}
	if d.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", d.Len(), len(want))
	}
	rec := d.NewBatch()
	defer rec.Release()
	requireRows(t, rec, want)
}

func TestJSONDecoderRejects(t *testing.T) {
	mem := newMem(t)
	d := NewJSONDecoder(testSchema(t), mem)
	defer d.Release()
	cases := []struct {
		line  string
		field string // "" for a line error
		in    []string
	}{
		{`{"id": 1.5}`, "id", []string{"1.5", "want int64", "not an integral number"}},
		{`{"id": "7"}`, "id", []string{`"7"`, "want int64, got string"}},
		{`{"id": 1e19}`, "id", []string{"out of int64 range"}},
		{`{"id": 9223372036854775808}`, "id", []string{"out of int64 range"}},
		{`{"id": [1]}`, "id", []string{"[1]", "got array"}},
		{`{"price": true}`, "price", []string{"want float64, got bool"}},
		{`{"price": 1e999}`, "price", []string{"1e999", "want float64"}},
		{`{"ok": 1}`, "ok", []string{"want bool, got number"}},
		{`{"ok": "true"}`, "ok", []string{"want bool, got string"}},
		{`{"name": 5}`, "name", []string{"want string, got number"}},
		{`{"name": {"a": 1}}`, "name", []string{"got object"}},
		{`{"ts": "yesterday"}`, "ts", []string{`"yesterday"`, "RFC 3339"}},
		{`{"ts": 1.5}`, "ts", []string{"want timestamp_ms", "not an integral number"}},
		{`{"ts": false}`, "ts", []string{"got bool"}},
		{`{"id": 1, "name": 2}`, "name", nil},
		{``, "", []string{"want a value"}},
		{`   `, "", nil},
		{`not json`, "", nil},
		{`[1, 2]`, "", []string{"not a JSON object"}},
		{`"str"`, "", []string{"not a JSON object"}},
		{`{"id": 1`, "", []string{"end of line"}},
		{`{"id": 1}}`, "", []string{"want end of line"}},
		{`{"id": 1} {"id": 2}`, "", nil},
		{`{"id": 01}`, "", nil},
		{`{"id": -}`, "", []string{"bad number"}},
		{`{"id": 1.}`, "", nil},
		{`{"id" 1}`, "", []string{"want ':'"}},
		{`{id: 1}`, "", []string{"want a field name"}},
		{`{"id": 1,}`, "", nil},
		{`{"x": [1,]}`, "", nil},
		{`{"x": {"a" 1}}`, "", nil},
		{`{"x": tru}`, "", nil},
		{`{"x": nul, "id": 1}`, "", nil},
		{`{"name": "a` + "\x01" + `b"}`, "", []string{"control character"}},
		{`{"name": "a\qb"}`, "", []string{"bad escape"}},
		{`{"name": "\u12"}`, "", []string{`bad \u escape`}},
		{`{"name": "open`, "", []string{"unterminated string"}},
		{`{"x": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "", []string{"nested too deeply"}},
	}
	for _, c := range cases {
		if err := d.Append([]byte(`{"id": 99}`)); err != nil {
			t.Fatal(err)
		}
		before := d.Len()
		err := d.Append([]byte(c.line))
		var re *RecordError
		if !errors.As(err, &re) {
			t.Errorf("Append(%.60s): got %v, want a *RecordError", c.line, err)
			continue
		}
		if d.Len() != before {
			t.Fatalf("Append(%.60s) failed but changed Len from %d to %d", c.line, before, d.Len())
		}
		if re.Field != c.field {
			t.Errorf("Append(%.60s): error %q names field %q, want %q", c.line, err, re.Field, c.field)
		}
		if c.field != "" && !strings.Contains(err.Error(), strconv.Quote(c.field)) {
			t.Errorf("Append(%.60s): error %q does not name the field", c.line, err)
		}
		for _, s := range c.in {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Append(%.60s): error %q does not say %q", c.line, err, s)
			}
		}
	}
	// The batch holds exactly the good lines.
	rec := d.NewBatch()
	defer rec.Release()
	want := make([][]any, len(cases))
	for i := range want {
		want[i] = []any{int64(99), nil, nil, nil, nil}
	}
	requireRows(t, rec, want)
}

func TestJSONLinesRoundTrip(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 400)
	defer rec.Release()
	var buf bytes.Buffer
	if err := WriteJSONLines(&buf, rec); err != nil {
		t.Fatal(err)
	}
	d := NewJSONDecoder(rec.Schema(), mem)
	defer d.Release()
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("invalid JSON line %s", sc.Bytes())
		}
		if err := d.Append(sc.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	got := d.NewBatch()
	defer got.Release()
	requireRows(t, got, rowsOf(rec))
}

func TestAppendJSONRow(t *testing.T) {
	mem := newMem(t)
	b := NewBuilder(testSchema(t), mem)
	defer b.Release()
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)
	b.Int64(colID, -12)
	b.String(colName, "q\"\\\n\x01<é>\u2028\xff")
	b.Float64(colPrice, 0.1)
	b.TimestampMs(colTS, ts.UnixMilli())
	b.Bool(colOK, false)
	for _, f := range []float64{math.NaN(), math.Inf(1), 1e21, 1e-7, 100} {
		b.Null(colID)
		b.Null(colName)
		b.Float64(colPrice, f)
		b.Null(colTS)
		b.Null(colOK)
	}
	rec := b.NewBatch()
	defer rec.Release()
	want := []string{
		`{"id":-12,"name":"q\"\\\n\u0001<é>\u2028\ufffd","price":0.1,"ts":"2024-01-02T03:04:05.006Z","ok":false}`,
		`{"id":null,"name":null,"price":null,"ts":null,"ok":null}`,
		`{"id":null,"name":null,"price":null,"ts":null,"ok":null}`,
		`{"id":null,"name":null,"price":1e+21,"ts":null,"ok":null}`,
		`{"id":null,"name":null,"price":1e-07,"ts":null,"ok":null}`,
		`{"id":null,"name":null,"price":100,"ts":null,"ok":null}`,
	}
	for r, w := range want {
		if got := string(AppendJSONRow(nil, rec, r)); got != w {
			t.Errorf("row %d:\n got %s\nwant %s", r, got, w)
		}
	}
	// The string escapes agree with encoding/json.
	var s struct{ Name string }
	if err := json.Unmarshal(AppendJSONRow(nil, rec, 0), &s); err != nil || s.Name != "q\"\\\n\x01<é>\u2028\ufffd" {
		t.Errorf("encoding/json reads name %q, %v", s.Name, err)
	}
}

func TestWriteJSONLinesError(t *testing.T) {
	mem := newMem(t)
	rec := testBatch(t, mem, 0, 10)
	defer rec.Release()
	boom := errors.New("boom")
	if err := WriteJSONLines(failWriter{boom}, rec); !errors.Is(err, boom) {
		t.Errorf("got %v, want boom", err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func FuzzJSONDecoder(f *testing.F) {
	for _, s := range []string{
		`{"id": 1, "name": "a", "price": 2.5, "ts": "2024-01-02T03:04:05.006Z", "ok": true}`,
		`{"ts": 1704164645006, "id": -7, "ok": false, "x": [1, {"y": null}]}`,
		`{"name": "\u00e9\ud83d\ude00\n", "n\u0061me": "dup"}`,
		`{"id": 3.0e0, "price": -0}`,
		`{"id": 1.5}`,
		`[1]`,
		`{"id": 1`,
		"{\"name\": \"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	mem := memory.NewGoAllocator()
	schema, _ := NewSchema(testFields)
	d := NewJSONDecoder(schema, mem)
	f.Fuzz(func(t *testing.T, line []byte) {
		before := d.Len()
		err := d.Append(line)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RecordError", err)
			}
			if d.Len() != before {
				t.Fatalf("failed Append changed Len from %d to %d", before, d.Len())
			}
			if re.Field == "" && json.Valid(line) && bytes.HasPrefix(bytes.TrimLeft(line, " \t\r\n"), []byte("{")) {
				t.Fatalf("valid JSON object rejected as a whole: %v", err)
			}
			return
		}
		if d.Len() != before+1 {
			t.Fatalf("Append changed Len from %d to %d", before, d.Len())
		}
		if !json.Valid(line) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		rec := d.NewBatch()
		defer rec.Release()
		checkAgainstEncodingJSON(t, line, rec)
	})
}

// checkAgainstEncodingJSON compares the one row of rec with what
// encoding/json reads from line.
func checkAgainstEncodingJSON(t *testing.T, line []byte, rec arrow.RecordBatch) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	for c, f := range testFields {
		got := Value(rec.Column(c), 0)
		want, ok := m[f.Name]
		if !ok || want == nil {
			if got != nil {
				t.Fatalf("field %s: got %#v, encoding/json has %#v", f.Name, got, want)
			}
			continue
		}
		match := false
		switch w := want.(type) {
		case json.Number:
			fl, err := strconv.ParseFloat(string(w), 64)
			switch g := got.(type) {
			case int64:
				match = err == nil && float64(g) == fl
			case float64:
				match = err == nil && g == fl
			case time.Time:
				match = err == nil && float64(g.UnixMilli()) == fl
			}
		case string:
			switch g := got.(type) {
			case string:
				match = g == w
			case time.Time:
				tm, err := time.Parse(time.RFC3339, w)
				match = err == nil && tm.UnixMilli() == g.UnixMilli()
			}
		case bool:
			match = got == w
		}
		if !match {
			t.Fatalf("field %s: got %#v, encoding/json has %#v", f.Name, got, want)
		}
	}
}

func BenchmarkJSONDecoder(b *testing.B) {
	mem := memory.NewGoAllocator()
	schema, _ := NewSchema(testFields)
	d := NewJSONDecoder(schema, mem)
	defer d.Release()
	line := []byte(`{"id": 12345, "name": "customer-42", "price": 19.99, "ts": "2024-01-02T03:04:05.006Z", "ok": true, "extra": [1, 2]}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := d.Append(line); err != nil {
			b.Fatal(err)
		}
		if d.Len() == 8192 {
			d.NewBatch().Release()
		}
	}
}
