package guest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/arrowfmt"
)

// TestDecodeKeyMatchesAppendKey: the guest decodes the host's key
// encoding (arrowfmt.AppendKey, what weir keys state with) for every type
// and null.
func TestDecodeKeyMatchesAppendKey(t *testing.T) {
	ts := time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC)
	for _, c := range []struct {
		types []Type
		vals  []any
	}{
		{nil, nil},
		{[]Type{Int64}, []any{int64(0)}},
		{[]Type{Int64}, []any{int64(math.MinInt64)}},
		{[]Type{Int64}, []any{int64(math.MaxInt64)}},
		{[]Type{Int64}, []any{int64(-42)}},
		{[]Type{Int64}, []any{nil}},
		{[]Type{TimestampMs}, []any{ts}},
		{[]Type{TimestampMs}, []any{time.UnixMilli(1_700_000_000_123).UTC()}},
		{[]Type{TimestampMs}, []any{nil}},
		{[]Type{Float64}, []any{0.0}},
		{[]Type{Float64}, []any{-1.5}},
		{[]Type{Float64}, []any{math.Inf(1)}},
		{[]Type{Float64}, []any{math.Inf(-1)}},
		{[]Type{Float64}, []any{math.SmallestNonzeroFloat64}},
		{[]Type{Float64}, []any{-math.MaxFloat64}},
		{[]Type{Float64}, []any{math.NaN()}},
		{[]Type{Float64}, []any{nil}},
		{[]Type{Bool}, []any{true}},
		{[]Type{Bool}, []any{false}},
		{[]Type{Bool}, []any{nil}},
		{[]Type{String}, []any{""}},
		{[]Type{String}, []any{"downtown"}},
		{[]Type{String}, []any{strings.Repeat("ü", 200)}}, // a two-byte length
		{[]Type{String}, []any{nil}},
		{[]Type{String, Int64, Bool, Float64, TimestampMs}, []any{"zone", int64(7), true, 2.5, ts}},
		{[]Type{String, String, Int64}, []any{nil, "", nil}},
	} {
		enc := arrowfmt.AppendKey(nil, c.vals...)
		got, err := decodeKey(nil, enc, c.types)
		if err != nil {
			t.Errorf("%v %v: %v", c.types, c.vals, err)
			continue
		}
		if len(got) != len(c.vals) {
			t.Errorf("%v %v: decoded %v", c.types, c.vals, got)
			continue
		}
		for i := range got {
			if !valueEqual(got[i], c.vals[i]) {
				t.Errorf("%v %v: decoded %#v", c.types, c.vals, got)
			}
		}
		// The decoder agrees with the host's own.
		host, err := arrowfmt.DecodeKeyString(string(enc), toArrowfmt(c.types))
		if err != nil {
			t.Fatal(err)
		}
		for i := range host {
			if !valueEqual(got[i], host[i]) {
				t.Errorf("%v %v: guest %#v, arrowfmt %#v", c.types, c.vals, got, host)
			}
		}
	}
}

func toArrowfmt(ts []Type) []arrowfmt.Type {
	out := make([]arrowfmt.Type, len(ts))
	for i, t := range ts {
		out[i] = arrowfmt.Type(t)
	}
	return out
}

func TestDecodeKeyErrors(t *testing.T) {
	for _, c := range []struct {
		key   []byte
		types []Type
		want  string
	}{
		{nil, []Type{Int64}, "decode key: truncated at column 0 of 1"},
		{[]byte{1, 0, 0}, []Type{Int64}, "decode key: truncated int64 at column 0"},
		{[]byte{2}, []Type{Int64}, "decode key: bad tag 0x2 at column 0"},
		{[]byte{1, 2}, []Type{Bool}, "decode key: bad bool at column 0"},
		{[]byte{1, 5, 'a'}, []Type{String}, "decode key: bad string length at column 0"},
		{[]byte{0, 0}, []Type{String}, "decode key: 1 trailing bytes"},
	} {
		if _, err := decodeKey(nil, c.key, c.types); err == nil || err.Error() != c.want {
			t.Errorf("decodeKey(%x, %v) = %v, want %s", c.key, c.types, err, c.want)
		}
	}
}

func TestDefaultCodec(t *testing.T) {
	roundTrip(t, int64(-7), 8)
	roundTrip(t, int64(math.MaxInt64), 8)
	roundTrip(t, 2.5, 8)
	roundTrip(t, "zone", 4)
	roundTrip(t, "", 0)
	roundTrip(t, true, 1)
	roundTrip(t, false, 1)
	type acc struct {
		N   int64   `json:"n"`
		Sum float64 `json:"sum"`
	}
	roundTrip(t, acc{3, 1.5}, len(`{"n":3,"sum":1.5}`))
	roundTrip(t, []string{"a", "b"}, len(`["a","b"]`))

	b := DefaultCodec[[]byte]().Append(nil, []byte{1, 2})
	got, err := DefaultCodec[[]byte]().Decode(b)
	if err != nil || string(got) != "\x01\x02" {
		t.Errorf("[]byte: %v, %v", got, err)
	}
	if &got[0] == &b[0] {
		t.Error("decoded []byte aliases the buffer")
	}

	for name, err := range map[string]error{
		"int64 of 3 bytes": decodeErr[int64]([]byte{1, 2, 3}),
		"bool 2":           decodeErr[bool]([]byte{2}),
		"json":             decodeErr[acc]([]byte("{")),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func roundTrip[T any](t *testing.T, v T, size int) {
	t.Helper()
	c := DefaultCodec[T]()
	b := c.Append([]byte("prefix"), v)
	if len(b)-len("prefix") != size {
		t.Errorf("%T %v encodes to %d bytes, want %d", v, v, len(b)-6, size)
	}
	got, err := c.Decode(b[len("prefix"):])
	if err != nil {
		t.Fatalf("%T %v: %v", v, v, err)
	}
	if !equalish(got, v) {
		t.Errorf("round trip of %T %v gave %v", v, v, got)
	}
}

func equalish(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs := b.([]string)
		return strings.Join(as, ",") == strings.Join(bs, ",")
	}
	return a == b
}

func decodeErr[T any](b []byte) error {
	_, err := DefaultCodec[T]().Decode(b)
	return err
}
