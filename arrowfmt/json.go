package arrowfmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrInvalidRecord is wrapped by every *RecordError.
var ErrInvalidRecord = errors.New("arrowfmt: invalid record")

// RecordError reports input that does not fit the schema: a line that is
// not a JSON object (Field is empty), or a field whose value has the wrong
// type or range. Value is the offending text, shortened if long; Reason says
// what was expected.
type RecordError struct {
	Field  string
	Value  string
	Reason string
}

func (e *RecordError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("arrowfmt: invalid record %s: %s", e.Value, e.Reason)
	}
	return fmt.Sprintf("arrowfmt: field %q: invalid value %s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalidRecord) match.
func (e *RecordError) Unwrap() error { return ErrInvalidRecord }

// JSONDecoder appends JSON lines, one object per line, as rows of a schema.
//
// Fields are matched by name; missing fields and JSON null become nulls,
// fields not in the schema are ignored, and of duplicate keys the last one
// counts. int64 fields take integral numbers (3 and 3.0, not 1.5), float64
// fields any number, bool fields true or false, string fields strings, and
// timestamp_ms fields integer milliseconds or an RFC 3339 string.
//
// A JSONDecoder is not safe for concurrent use; Release it when done.
type JSONDecoder struct {
	b     *Builder
	types []Type
	names map[string]int
	vals  []jsonValue
}

// jsonValue is one parsed field of the current line.
type jsonValue struct {
	set bool // present and not null
	i   int64
	f   float64
	b   bool
	raw []byte // string value without escapes, aliasing the line
	str string // string value that needed unescaping
	esc bool   // str, not raw, holds the value
}

// NewJSONDecoder returns a JSONDecoder for schema, whose fields must all have
// a supported Type; it panics otherwise.
func NewJSONDecoder(schema *arrow.Schema, mem memory.Allocator) *JSONDecoder {
	types, err := Types(schema)
	if err != nil {
		panic(fmt.Sprintf("arrowfmt: new JSON decoder: %v", err))
	}
	d := &JSONDecoder{
		b:     NewBuilder(schema, mem),
		types: types,
		names: make(map[string]int, len(types)),
		vals:  make([]jsonValue, len(types)),
	}
	for i, f := range schema.Fields() {
		d.names[f.Name] = i
	}
	return d
}

// Len returns the number of rows appended since the last NewBatch.
func (d *JSONDecoder) Len() int { return d.b.Len() }

// NewBatch returns the rows appended so far, which the caller releases, and
// starts a new batch.
func (d *JSONDecoder) NewBatch() arrow.RecordBatch { return d.b.NewBatch() }

// Release frees the decoder's buffers.
func (d *JSONDecoder) Release() { d.b.Release() }

// Append parses line as one JSON object and appends it as a row. A line
// that is not valid JSON, not an object, or has a field of the wrong type
// gives a *RecordError and appends nothing. A trailing "\r" or other
// whitespace is allowed.
func (d *JSONDecoder) Append(line []byte) error {
	for i := range d.vals {
		d.vals[i] = jsonValue{}
	}
	p := jsonParser{data: line}
	if err := d.parseLine(&p); err != nil {
		return err
	}
	for i, v := range d.vals {
		if !v.set {
			d.b.Null(i)
			continue
		}
		switch d.types[i] {
		case Int64:
			d.b.ints[i].Append(v.i)
		case TimestampMs:
			d.b.times[i].Append(arrow.Timestamp(v.i))
		case Float64:
			d.b.floats[i].Append(v.f)
		case Bool:
			d.b.bools[i].Append(v.b)
		case String:
			if v.esc {
				d.b.strs[i].Append(v.str)
			} else {
				d.b.strs[i].BinaryBuilder.Append(v.raw)
			}
		}
	}
	return nil
}

func (d *JSONDecoder) parseLine(p *jsonParser) error {
	p.skipSpace()
	if p.eof() || p.peek() != '{' {
		if err := p.skipValue(0); err != nil {
			return p.lineError(err.Error())
		}
		return p.lineError("not a JSON object")
	}
	p.pos++
	p.skipSpace()
	if !p.eof() && p.peek() == '}' {
		p.pos++
		return d.parseEnd(p)
	}
	for {
		p.skipSpace()
		if p.eof() || p.peek() != '"' {
			return p.syntaxError("want a field name")
		}
		keyStart := p.pos
		key, esc, err := p.scanString()
		if err != nil {
			return p.lineError(err.Error())
		}
		if esc {
			key = p.data[keyStart:p.pos] // quoted, for unescaping
		}
		col, known := d.lookup(key, esc)
		p.skipSpace()
		if p.eof() || p.peek() != ':' {
			return p.syntaxError("want ':'")
		}
		p.pos++
		p.skipSpace()
		if known {
			if err := d.parseField(p, col); err != nil {
				return err
			}
		} else if err := p.skipValue(1); err != nil {
			return p.lineError(err.Error())
		}
		p.skipSpace()
		if p.eof() {
			return p.syntaxError("want ',' or '}'")
		}
		switch p.peek() {
		case ',':
			p.pos++
			continue
		case '}':
			p.pos++
			return d.parseEnd(p)
		}
		return p.syntaxError("want ',' or '}'")
	}
}

func (d *JSONDecoder) parseEnd(p *jsonParser) error {
	p.skipSpace()
	if !p.eof() {
		return p.syntaxError("want end of line after the object")
	}
	return nil
}

// lookup finds the column of a field name: the raw name, or if esc the
// quoted name that needs unescaping.
func (d *JSONDecoder) lookup(key []byte, esc bool) (int, bool) {
	if !esc {
		col, ok := d.names[string(key)]
		return col, ok
	}
	var s string
	if err := json.Unmarshal(key, &s); err != nil {
		return 0, false
	}
	col, ok := d.names[s]
	return col, ok
}

// parseField parses the value at p into d.vals[col].
func (d *JSONDecoder) parseField(p *jsonParser, col int) error {
	t := d.types[col]
	v := &d.vals[col]
	start := p.pos
	reject := func(reason string) error {
		return &RecordError{
			Field:  d.b.schema.Field(col).Name,
			Value:  truncateForError(string(p.data[start:p.pos])),
			Reason: reason,
		}
	}
	if p.eof() {
		return p.syntaxError("want a value")
	}
	if p.literal("null") {
		*v = jsonValue{}
		return nil
	}
	c := p.peek()
	switch {
	case c == '-' || ('0' <= c && c <= '9'):
		if err := p.scanNumber(); err != nil {
			return p.lineError(err.Error())
		}
		num := string(p.data[start:p.pos])
		switch t {
		case Int64, TimestampMs:
			i, reason := parseJSONInt(num)
			if reason != "" {
				return reject(fmt.Sprintf("want %s, %s", t, reason))
			}
			*v = jsonValue{set: true, i: i}
			return nil
		case Float64:
			f, ok := parseJSONFloat(num)
			if !ok {
				return reject("want float64, a number in range")
			}
			*v = jsonValue{set: true, f: f}
			return nil
		}
	case c == '"':
		raw, esc, err := p.scanString()
		if err != nil {
			return p.lineError(err.Error())
		}
		switch t {
		case String:
			if esc {
				var s string
				if err := json.Unmarshal(p.data[start:p.pos], &s); err != nil {
					return p.lineError(err.Error())
				}
				*v = jsonValue{set: true, str: s, esc: true}
			} else {
				*v = jsonValue{set: true, raw: raw}
			}
			return nil
		case TimestampMs:
			s := string(raw)
			if esc {
				if err := json.Unmarshal(p.data[start:p.pos], &s); err != nil {
					return p.lineError(err.Error())
				}
			}
			tm, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return reject("want timestamp_ms, an RFC 3339 time or integer milliseconds")
			}
			*v = jsonValue{set: true, i: tm.UnixMilli()}
			return nil
		}
	case p.literal("true"):
		if t == Bool {
			*v = jsonValue{set: true, b: true}
			return nil
		}
	case p.literal("false"):
		if t == Bool {
			*v = jsonValue{set: true}
			return nil
		}
	default:
		if err := p.skipValue(1); err != nil {
			return p.lineError(err.Error())
		}
	}
	return reject(fmt.Sprintf("want %s, got %s", t, jsonKind(p.data[start])))
}

func jsonKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "number"
}

// jsonParser scans one line of JSON. Its scan and skip methods validate
// what they pass over as RFC 8259 JSON.
type jsonParser struct {
	data []byte
	pos  int
}

// maxJSONDepth is the nesting limit of encoding/json.
const maxJSONDepth = 10000

func (p *jsonParser) eof() bool  { return p.pos >= len(p.data) }
func (p *jsonParser) peek() byte { return p.data[p.pos] }

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) lineError(reason string) error {
	return &RecordError{Value: truncateForError(strconv.Quote(string(p.data))), Reason: reason}
}

func (p *jsonParser) syntaxError(want string) error {
	if p.eof() {
		return p.lineError(fmt.Sprintf("invalid JSON: unexpected end of line: %s", want))
	}
	return p.lineError(fmt.Sprintf("invalid JSON: unexpected %q at byte %d: %s", p.data[p.pos], p.pos, want))
}

type scanError string

func (e scanError) Error() string { return string(e) }

func (p *jsonParser) errorf(format string, args ...any) error {
	return scanError("invalid JSON: " + fmt.Sprintf(format, args...))
}

// literal consumes word if the input continues with it.
func (p *jsonParser) literal(word string) bool {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

// scanString consumes a string and returns its contents between the quotes.
// esc reports that the contents need unescaping (escape sequences or
// invalid UTF-8) before use.
func (p *jsonParser) scanString() (raw []byte, esc bool, err error) {
	start := p.pos
	p.pos++ // opening quote
	ascii := true
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			raw = p.data[start+1 : p.pos]
			p.pos++
			if !ascii && !utf8.Valid(raw) {
				esc = true
			}
			return raw, esc, nil
		case c == '\\':
			esc = true
			if p.pos+1 >= len(p.data) {
				return nil, false, p.errorf("unterminated string at byte %d", start)
			}
			switch p.data[p.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.pos += 2
			case 'u':
				if len(p.data)-p.pos < 6 || !isHex(p.data[p.pos+2:p.pos+6]) {
					return nil, false, p.errorf("bad \\u escape at byte %d", p.pos)
				}
				p.pos += 6
			default:
				return nil, false, p.errorf("bad escape at byte %d", p.pos)
			}
		case c < 0x20:
			return nil, false, p.errorf("control character in string at byte %d", p.pos)
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			p.pos++
		}
	}
	return nil, false, p.errorf("unterminated string at byte %d", start)
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// scanNumber consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) scanNumber() error {
	end, ok := numberEnd(p.data, p.pos)
	if !ok {
		return p.errorf("bad number at byte %d", p.pos)
	}
	p.pos = end
	return nil
}

func numberEnd(b []byte, i int) (int, bool) {
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, false
		}
	}
	return i, true
}

// skipValue consumes any JSON value; depth is the nesting depth around it.
func (p *jsonParser) skipValue(depth int) error {
	if p.eof() {
		return p.errorf("unexpected end of line: want a value")
	}
	switch c := p.peek(); {
	case c == '"':
		_, _, err := p.scanString()
		return err
	case c == '-' || ('0' <= c && c <= '9'):
		return p.scanNumber()
	case c == '{' || c == '[':
		if depth+1 > maxJSONDepth {
			return p.errorf("nested too deeply")
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		p.pos++
		p.skipSpace()
		if !p.eof() && p.peek() == closer {
			p.pos++
			return nil
		}
		for {
			p.skipSpace()
			if c == '{' {
				if p.eof() || p.peek() != '"' {
					return p.errorf("want a field name at byte %d", p.pos)
				}
				if _, _, err := p.scanString(); err != nil {
					return err
				}
				p.skipSpace()
				if p.eof() || p.peek() != ':' {
					return p.errorf("want ':' at byte %d", p.pos)
				}
				p.pos++
				p.skipSpace()
			}
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			p.skipSpace()
			if p.eof() {
				return p.errorf("unexpected end of line: want ',' or %q", closer)
			}
			switch p.peek() {
			case ',':
				p.pos++
				continue
			case closer:
				p.pos++
				return nil
			}
			return p.errorf("unexpected %q at byte %d: want ',' or %q", p.peek(), p.pos, closer)
		}
	case p.literal("true"), p.literal("false"), p.literal("null"):
		return nil
	}
	return p.errorf("unexpected %q at byte %d: want a value", p.peek(), p.pos)
}

// parseJSONInt returns the int64 value of the JSON number s if it is
// integral (3, 3.0, 3e2, -0), or says why not. It is exact: no float64
// rounding for large values.
func parseJSONInt(s string) (int64, string) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, ""
	}
	if end, ok := numberEnd([]byte(s), 0); !ok || end != len(s) {
		return 0, "not a number"
	}
	// Split into sign, digits and a decimal exponent: value = digits * 10^exp.
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, expPart := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			mant, expPart = s[:i], s[i+1:]
			break
		}
	}
	intPart, frac := mant, ""
	for i := 0; i < len(mant); i++ {
		if mant[i] == '.' {
			intPart, frac = mant[:i], mant[i+1:]
			break
		}
	}
	digits := []byte(intPart + frac)
	exp := -len(frac)
	if expPart != "" {
		e, err := strconv.Atoi(expPart)
		if err != nil || e > 1<<20 || e < -(1<<20) {
			if allZero(digits) {
				return 0, ""
			}
			if expPart[0] == '-' {
				return 0, "not an integral number"
			}
			return 0, "out of int64 range"
		}
		exp += e
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, ""
	}
	for exp < 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if exp < 0 {
		return 0, "not an integral number"
	}
	if len(digits)+exp > 19 {
		return 0, "out of int64 range"
	}
	for ; exp > 0; exp-- {
		digits = append(digits, '0')
	}
	if neg {
		digits = append([]byte{'-'}, digits...)
	}
	i, err := strconv.ParseInt(string(digits), 10, 64)
	if err != nil {
		return 0, "out of int64 range"
	}
	return i, ""
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}

// parseJSONFloat returns the float64 value of the JSON number s; false if
// s is not a JSON number or is beyond float64's range.
func parseJSONFloat(s string) (float64, bool) {
	if end, ok := numberEnd([]byte(s), 0); !ok || end != len(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// AppendJSONRow appends row of rec to dst as one JSON object, fields in
// schema order, without a trailing newline. Timestamps are RFC 3339 UTC
// with milliseconds ("2006-01-02T15:04:05.000Z"), floats the shortest text
// that parses back to the same value, and nulls, NaN and infinities null.
func AppendJSONRow(dst []byte, rec arrow.RecordBatch, row int) []byte {
	dst = append(dst, '{')
	for i, f := range rec.Schema().Fields() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, f.Name)
		dst = append(dst, ':')
		dst = appendJSONValue(dst, rec.Column(i), row)
	}
	return append(dst, '}')
}

const jsonTimeLayout = "2006-01-02T15:04:05.000Z"

func appendJSONValue(dst []byte, col arrow.Array, row int) []byte {
	if col.IsNull(row) {
		return append(dst, "null"...)
	}
	switch a := col.(type) {
	case *array.Int64:
		return strconv.AppendInt(dst, a.Value(row), 10)
	case *array.Float64:
		f := a.Value(row)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	case *array.String:
		return appendJSONString(dst, a.Value(row))
	case *array.Boolean:
		return strconv.AppendBool(dst, a.Value(row))
	case *array.Timestamp:
		if a.DataType().(*arrow.TimestampType).Unit == arrow.Millisecond {
			dst = append(dst, '"')
			dst = time.UnixMilli(int64(a.Value(row))).UTC().AppendFormat(dst, jsonTimeLayout)
			return append(dst, '"')
		}
	}
	b, err := json.Marshal(col.GetOneForMarshal(row))
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; HTML characters are left alone.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// WriteJSONLines writes every row of rec to w as a JSON line ending in "\n".
func WriteJSONLines(w io.Writer, rec arrow.RecordBatch) error {
	const flushAt = 64 << 10
	var buf []byte
	for row := 0; row < int(rec.NumRows()); row++ {
		buf = AppendJSONRow(buf, rec, row)
		buf = append(buf, '\n')
		if len(buf) >= flushAt {
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("write json lines: %w", err)
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("write json lines: %w", err)
		}
	}
	return nil
}
