package builtin

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// The inputs of most join tests: ts, k, k2, lv, lf on the left and rts,
// rk, rk2, rv, rb on the right. Keys are k2 = rk2 (int64, the fast path)
// or (k, k2) = (rk, rk2) (encoded keys).
var (
	joinLeftFields = []arrowfmt.Field{
		{Name: "ts", Type: arrowfmt.TimestampMs},
		{Name: "k", Type: arrowfmt.String},
		{Name: "k2", Type: arrowfmt.Int64},
		{Name: "lv", Type: arrowfmt.Int64},
		{Name: "lf", Type: arrowfmt.Float64},
	}
	joinRightFields = []arrowfmt.Field{
		{Name: "rts", Type: arrowfmt.TimestampMs},
		{Name: "rk", Type: arrowfmt.String},
		{Name: "rk2", Type: arrowfmt.Int64},
		{Name: "rv", Type: arrowfmt.String},
		{Name: "rb", Type: arrowfmt.Bool},
	}
)

func joinStreams(t testing.TB) [2]Stream {
	t.Helper()
	l, err := arrowfmt.NewSchema(joinLeftFields)
	if err != nil {
		t.Fatal(err)
	}
	r, err := arrowfmt.NewSchema(joinRightFields)
	if err != nil {
		t.Fatal(err)
	}
	return [2]Stream{{Schema: l, TimeColumn: 0}, {Schema: r, TimeColumn: 0}}
}

// joinKeyBy returns the key columns of each side: "int" (k2 = rk2) or
// "multi" ((k, k2) = (rk, rk2)).
func joinKeyBy(mode string) (left, right []string) {
	if mode == "multi" {
		return []string{"k", "k2"}, []string{"rk", "rk2"}
	}
	return []string{"k2"}, []string{"rk2"}
}

func joinOp(jn spec.Join, keys string) *spec.Operator {
	jn.Left.Input, jn.Right.Input = "l", "r"
	jn.Left.KeyBy, jn.Right.KeyBy = joinKeyBy(keys)
	return &spec.Operator{Name: "j", Join: &jn}
}

// joinHarness drives one join operator with a window test harness's
// output collector and snapshot helpers.
type joinHarness struct {
	*winHarness
	ins [2]Stream
}

func newJoinHarness(t testing.TB, o *spec.Operator, ins [2]Stream, kgStart, kgEnd int) *joinHarness {
	t.Helper()
	return newJoinHarnessOn(t, false, o, ins, kgStart, kgEnd)
}

// newJoinHarnessOn is newJoinHarness with the join on pebble if store
// (newTestJoin).
func newJoinHarnessOn(t testing.TB, store bool, o *spec.Operator, ins [2]Stream, kgStart, kgEnd int) *joinHarness {
	t.Helper()
	h := &joinHarness{
		winHarness: &winHarness{
			t:        t,
			mem:      memory.NewCheckedAllocator(memory.NewGoAllocator()),
			out:      &winCollector{},
			late:     &winCollector{},
			counters: &task.Counters{},
		},
		ins: ins,
	}
	op, err := newTestJoin(t, store, o, ins)
	if err != nil {
		t.Fatal(err)
	}
	h.op = op
	ctx := &task.Context{
		Job: "test", Node: o.Name, MaxParallelism: 128, KeyGroupStart: kgStart, KeyGroupEnd: kgEnd,
		Mem: h.mem, Out: h.out, Counters: h.counters,
	}
	if err := op.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := op.Close(); err != nil {
			t.Error(err)
		}
		if err := op.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
		h.mem.AssertSize(t, 0)
	})
	return h
}

// side feeds rows (Go values, as winBatch takes them) to input side.
func (h *joinHarness) side(side int, rows ...[]any) {
	h.t.Helper()
	if err := h.sideErr(side, rows...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *joinHarness) sideErr(side int, rows ...[]any) error {
	h.t.Helper()
	b := winBatch(h.t, h.mem, h.ins[side].Schema, rows...)
	defer b.Release()
	return h.op.(task.TwoInputOperator).ProcessBatchFrom(side, b)
}

func TestJoinSchema(t *testing.T) {
	ins := joinStreams(t)
	names := func(s Stream) string {
		var out []string
		for _, f := range s.Schema.Fields() {
			typ, err := arrowfmt.TypeOf(f.Type)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, f.Name+":"+string(typ))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name     string
		jn       spec.Join
		left     Stream // default: ins[0]
		right    Stream
		cols     string
		time     int
		offset   int64
		lk, rk   []int
		keysMode string
	}{
		{
			name: "default columns", jn: spec.Join{Type: spec.JoinInterval, Lower: -winMs(5), Upper: winMs(5)},
			cols: "ts:timestamp_ms k:string k2:int64 lv:int64 lf:float64 rts:timestamp_ms rk:string rk2:int64 rv:string rb:bool",
			time: 0, lk: []int{2}, rk: []int{2},
		},
		{
			name: "columns mapping", keysMode: "multi",
			jn: spec.Join{Type: spec.JoinRegular, Columns: spec.NewOrderedMap(
				spec.Pair{Key: "v", Value: "right.rv"}, spec.Pair{Key: "at", Value: "right.rts"},
				spec.Pair{Key: "key", Value: "left.k"}, spec.Pair{Key: "when", Value: "left.ts"}, spec.Pair{Key: "again", Value: "left.ts"})},
			cols: "v:string at:timestamp_ms key:string when:timestamp_ms again:timestamp_ms",
			time: 3, lk: []int{1, 2}, rk: []int{1, 2},
		},
		{
			name: "right time when the left's is not selected",
			jn: spec.Join{Type: spec.JoinRegular, Columns: spec.NewOrderedMap(
				spec.Pair{Key: "v", Value: "left.lv"}, spec.Pair{Key: "at", Value: "right.rts"})},
			right: Stream{Schema: ins[1].Schema, TimeColumn: 0, TimeOffset: -1},
			cols:  "v:int64 at:timestamp_ms", time: 1, offset: -1, lk: []int{2}, rk: []int{2},
		},
		{
			name: "no time selected",
			jn:   spec.Join{Type: spec.JoinRegular, Columns: spec.NewOrderedMap(spec.Pair{Key: "v", Value: "left.lv"})},
			cols: "v:int64", time: -1, lk: []int{2}, rk: []int{2},
		},
		{
			name: "regular join without time", jn: spec.Join{Type: spec.JoinRegular},
			left: Stream{Schema: ins[0].Schema, TimeColumn: -1}, right: Stream{Schema: ins[1].Schema, TimeColumn: -1},
			cols: "ts:timestamp_ms k:string k2:int64 lv:int64 lf:float64 rts:timestamp_ms rk:string rk2:int64 rv:string rb:bool",
			time: -1, lk: []int{2}, rk: []int{2},
		},
		{
			name: "window", jn: spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowSliding, Size: winMs(10), Slide: winMs(5)},
				Columns: spec.NewOrderedMap(spec.Pair{Key: "ts", Value: "left.ts"}, spec.Pair{Key: "rv", Value: "right.rv"}),
				Where:   "rv != '' && window_end > ts"},
			cols: "window_start:timestamp_ms window_end:timestamp_ms ts:timestamp_ms rv:string", time: 1, offset: -1,
			lk: []int{2}, rk: []int{2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			left, right := tc.left, tc.right
			if left.Schema == nil {
				left = ins[0]
			}
			if right.Schema == nil {
				right = ins[1]
			}
			o := joinOp(tc.jn, tc.keysMode)
			out, lk, rk, err := JoinSchema(o, left, right)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(out); got != tc.cols {
				t.Errorf("columns\n got %s\nwant %s", got, tc.cols)
			}
			if out.TimeColumn != tc.time || out.TimeOffset != tc.offset {
				t.Errorf("time column %d offset %d, want %d and %d", out.TimeColumn, out.TimeOffset, tc.time, tc.offset)
			}
			if !slices.Equal(lk, tc.lk) || !slices.Equal(rk, tc.rk) {
				t.Errorf("keys %v %v, want %v %v", lk, rk, tc.lk, tc.rk)
			}
			if _, err := NewJoin(o, left, right); err != nil {
				t.Errorf("NewJoin: %v", err)
			}
		})
	}
}

func TestJoinSchemaErrors(t *testing.T) {
	ins := joinStreams(t)
	noTime := [2]Stream{{Schema: ins[0].Schema, TimeColumn: -1}, {Schema: ins[1].Schema, TimeColumn: -1}}
	clash, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "rts", Type: arrowfmt.TimestampMs}, {Name: "k2", Type: arrowfmt.Int64}, {Name: "lv", Type: arrowfmt.String}})
	if err != nil {
		t.Fatal(err)
	}
	winClash, err := arrowfmt.NewSchema([]arrowfmt.Field{{Name: "window_end", Type: arrowfmt.TimestampMs}, {Name: "rk2", Type: arrowfmt.Int64}})
	if err != nil {
		t.Fatal(err)
	}
	tumbling := &spec.Window{Type: spec.WindowTumbling, Size: winMs(10)}
	for _, tc := range []struct {
		name string
		o    *spec.Operator
		ins  [2]Stream
		want []string
	}{
		{"left key", &spec.Operator{Name: "j", Join: &spec.Join{Type: spec.JoinRegular, Left: spec.JoinSide{KeyBy: []string{"sellr"}}, Right: spec.JoinSide{KeyBy: []string{"rk2"}}}}, ins,
			[]string{`join j: operators[j].join.left.keyBy: "sellr" is not a column of the input (columns: ts timestamp[ms, tz=UTC], k utf8`}},
		{"right key", &spec.Operator{Name: "j", Join: &spec.Join{Type: spec.JoinRegular, Left: spec.JoinSide{KeyBy: []string{"k2"}}, Right: spec.JoinSide{KeyBy: []string{"id"}}}}, ins,
			[]string{`join.right.keyBy: "id" is not a column of the input (columns: rts`}},
		{"missing keys", &spec.Operator{Name: "j", Join: &spec.Join{Type: spec.JoinRegular}}, ins,
			[]string{"join.left.keyBy: missing", "join.right.keyBy: missing"}},
		{"key types", &spec.Operator{Name: "j", Join: &spec.Join{Type: spec.JoinRegular, Left: spec.JoinSide{KeyBy: []string{"k2", "k"}}, Right: spec.JoinSide{KeyBy: []string{"rk", "rk2"}}}}, ins,
			[]string{`join.right.keyBy: column "rk" is string, but left key column "k2" is int64`, `column "rk2" is int64, but left key column "k" is string`}},
		{"key counts", &spec.Operator{Name: "j", Join: &spec.Join{Type: spec.JoinRegular, Left: spec.JoinSide{KeyBy: []string{"k2", "k"}}, Right: spec.JoinSide{KeyBy: []string{"rk2"}}}}, ins,
			[]string{`join.right.keyBy: 1 columns ["rk2"], but join.left.keyBy has 2 ["k2" "k"]`}},
		{"type", joinOp(spec.Join{Type: "outer"}, ""), ins, []string{`join.type: "outer" is not a join type: want regular, interval or window`}},
		{"columns value", joinOp(spec.Join{Type: spec.JoinRegular, Columns: spec.NewOrderedMap(spec.Pair{Key: "a", Value: "lft.k"}, spec.Pair{Key: "b", Value: "right"})}, ""), ins,
			[]string{`join.columns.a: "lft.k": want left.<column> or right.<column>`, `join.columns.b: "right": want left.<column> or right.<column>`}},
		{"columns column", joinOp(spec.Join{Type: spec.JoinRegular, Columns: spec.NewOrderedMap(spec.Pair{Key: "a", Value: "left.rv"})}, ""), ins,
			[]string{`join.columns.a: "left.rv": the left input has no column "rv" (columns: ts timestamp[ms, tz=UTC], k utf8`}},
		{"default clash", joinOp(spec.Join{Type: spec.JoinRegular}, ""), [2]Stream{ins[0], {Schema: clash, TimeColumn: 0}},
			[]string{`join.columns: missing, and the default output columns (every left column, then every right column) have "k2" twice, as left.k2 and right.k2: list the output columns`,
				`have "lv" twice`}},
		{"window clash", joinOp(spec.Join{Type: spec.JoinWindow, Window: tumbling}, ""), [2]Stream{ins[0], {Schema: winClash, TimeColumn: 0}},
			[]string{`have "window_end" twice, as the window_end column and right.window_end`}},
		{"window column name", joinOp(spec.Join{Type: spec.JoinWindow, Window: tumbling, Columns: spec.NewOrderedMap(spec.Pair{Key: "window_start", Value: "left.ts"})}, ""), ins,
			[]string{`join.columns.window_start: the name collides with the window_start column`}},
		{"interval without time", joinOp(spec.Join{Type: spec.JoinInterval, Upper: winMs(1)}, ""), [2]Stream{noTime[0], ins[1]},
			[]string{`join.left.input: "l" has no event time: an interval join needs event time on both inputs`}},
		{"window without time", joinOp(spec.Join{Type: spec.JoinWindow, Window: tumbling}, ""), [2]Stream{ins[0], noTime[1]},
			[]string{`join.right.input: "r" has no event time: a window join needs event time`}},
		{"ttl without time", joinOp(spec.Join{Type: spec.JoinRegular, TTL: spec.Duration(time.Second)}, ""), noTime,
			[]string{`join.left.input: "l" has no event time: a regular join with ttl needs`, `join.right.input: "r" has no event time`}},
		{"bounds", joinOp(spec.Join{Type: spec.JoinInterval, Lower: winMs(5), Upper: spec.Duration(1500 * time.Microsecond)}, ""), ins,
			[]string{"join.lower: 5ms is above upper 1.5ms", "join.upper: 1.5ms is not a whole number of milliseconds"}},
		{"ttl", joinOp(spec.Join{Type: spec.JoinRegular, TTL: -winMs(5)}, ""), ins, []string{"join.ttl: -5ms is negative"}},
		{"window missing", joinOp(spec.Join{Type: spec.JoinWindow}, ""), ins, []string{"join.window: missing"}},
		{"session", joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowSession, Gap: winMs(5)}}, ""), ins,
			[]string{`join.window.type: "session" is not supported in joins: want tumbling or sliding`}},
		{"slide", joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowSliding, Size: winMs(5), Slide: winMs(10)}}, ""), ins,
			[]string{"operators[j].join.window.slide: 10ms is longer than size 5ms"}},
		{"size", joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowTumbling, Size: spec.Duration(2500 * time.Microsecond)}}, ""), ins,
			[]string{"operators[j].join.window.size: 2.5ms is not a whole number of milliseconds"}},
		{"where type", joinOp(spec.Join{Type: spec.JoinRegular, Where: "lv + 1"}, ""), ins,
			[]string{`operators[j].join.where: expression "lv + 1": where must be a boolean expression, got int`}},
		{"where column", joinOp(spec.Join{Type: spec.JoinRegular, Where: "nope > 1"}, ""), ins,
			[]string{`operators[j].join.where: expression "nope > 1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := JoinSchema(tc.o, tc.ins[0], tc.ins[1])
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if _, err2 := NewJoin(tc.o, tc.ins[0], tc.ins[1]); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("NewJoin: %v, want the JoinSchema error", err2)
			}
		})
	}
}

// joinStep is one step of a join's input: a batch of one side, or a
// watermark when rows is nil.
type joinStep struct {
	side int
	rows [][]any
	wm   int64
}

// joinGenerate returns random steps: batches of 1 to 40 rows of either
// side, out of order within bound and some beyond it, with some null
// times, keys and values, and a watermark max_ts - bound - 1 after most
// batches.
func joinGenerate(rng *rand.Rand, batches int, keys int, bound int64) []joinStep {
	var steps []joinStep
	t, maxTs := int64(1000), int64(0)
	wm := task.MinWatermark
	str := func(vals ...string) any {
		if rng.IntN(20) == 0 {
			return nil
		}
		return vals[rng.IntN(len(vals))]
	}
	for range batches {
		side := rng.IntN(2)
		n := 1 + rng.IntN(40)
		if rng.IntN(4) == 0 {
			n = 1
		}
		rows := make([][]any, n)
		for i := range rows {
			t += int64(rng.IntN(3))
			var ts any = int(t - rng.Int64N(bound+1))
			switch rng.IntN(25) {
			case 0:
				ts = nil
			case 1, 2:
				ts = int(t - bound - 1 - rng.Int64N(3*bound))
			}
			if v, ok := ts.(int); ok {
				maxTs = max(maxTs, int64(v))
			}
			var k2 any = rng.IntN(keys)
			if rng.IntN(20) == 0 {
				k2 = nil
			}
			var v any = rng.IntN(20)
			if rng.IntN(10) == 0 {
				v = nil
			}
			if side == 0 {
				var f any = float64(rng.IntN(100)) / 4
				if rng.IntN(10) == 0 {
					f = nil
				}
				rows[i] = []any{ts, str("a", "b"), k2, v, f}
			} else {
				var b any = rng.IntN(2) == 0
				if rng.IntN(10) == 0 {
					b = nil
				}
				rows[i] = []any{ts, str("a", "b"), k2, str("x", "", "yy"), b}
			}
		}
		steps = append(steps, joinStep{side: side, rows: rows})
		if rng.IntN(3) != 0 {
			if w := maxTs - bound - 1; w > wm {
				wm = w
				steps = append(steps, joinStep{wm: wm})
			}
		}
	}
	return steps
}

// joinRowGroup is the key group of an input row keyed as keys says.
func joinRowGroup(row []any, keys string) int {
	if keys == "multi" {
		return arrowfmt.KeyGroup(arrowfmt.HashKeyValues(row[1], row[2]), 128)
	}
	return arrowfmt.KeyGroup(arrowfmt.HashKeyValues(row[2]), 128)
}

// step feeds s to h, only the rows of key groups [kgStart, kgEnd).
func (h *joinHarness) step(s joinStep, keys string, kgStart, kgEnd int) {
	h.t.Helper()
	if s.rows == nil {
		h.watermark(s.wm)
		return
	}
	var rows [][]any
	for _, row := range s.rows {
		if kg := joinRowGroup(row, keys); kg >= kgStart && kg < kgEnd {
			rows = append(rows, row)
		}
	}
	if len(rows) > 0 {
		h.side(s.side, rows...)
	}
}

// joinVal renders a Go value as winRows renders a column value.
func joinVal(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case string:
		if v == "" {
			return `""`
		}
		return v
	}
	panic(fmt.Sprintf("joinVal %T", v))
}

// joinArrival is an input row as the brute force sees it.
type joinArrival struct {
	side  int
	row   []any
	ts    int64
	hasTs bool
	key   string // "" for a null key
	wm    int64  // the watermark when it arrived
}

// joinWhere is the where of the randomized tests and its meaning in Go:
// null when lv or rb is null.
const joinWhere = "lv % 3 != 1 || rb"

func joinWhereKeeps(l, r []any) bool {
	lv, rb := l[3], r[4]
	return lv != nil && rb != nil && (lv.(int)%3 != 1 || rb.(bool))
}

// joinBrute computes the output of join jn (keys as joinKeyBy says, default
// columns) over steps by nested loops, and how many rows were late.
func joinBrute(jn spec.Join, keys string, steps []joinStep) (out []string, late int) {
	var rows []joinArrival
	wm := task.MinWatermark
	for _, s := range steps {
		if s.rows == nil {
			wm = max(wm, s.wm)
			continue
		}
		for _, row := range s.rows {
			a := joinArrival{side: s.side, row: row, wm: wm}
			if v, ok := row[0].(int); ok {
				a.ts, a.hasTs = int64(v), true
			}
			if row[2] != nil && (keys != "multi" || row[1] != nil) {
				a.key = fmt.Sprint(row[1:3]...)
				if keys != "multi" {
					a.key = fmt.Sprint(row[2])
				}
			}
			rows = append(rows, a)
		}
	}
	render := func(prefix string, l, r []any) string {
		var sb strings.Builder
		sb.WriteString(prefix)
		for i, v := range append(slices.Clone(l), r...) {
			if i > 0 || prefix != "" {
				sb.WriteByte(' ')
			}
			sb.WriteString(joinVal(v))
		}
		return sb.String()
	}
	keep := func(l, r []any) bool { return jn.Where == "" || joinWhereKeeps(l, r) }
	ms := func(d spec.Duration) int64 { return int64(d.D() / time.Millisecond) }
	windows := func(a joinArrival) map[int64]bool {
		w := map[int64]bool{}
		if !a.hasTs {
			return w
		}
		size, slide := ms(jn.Window.Size), ms(jn.Window.Size)
		if jn.Window.Type == spec.WindowSliding {
			slide = ms(jn.Window.Slide)
		}
		for _, start := range winStarts(a.ts, size, slide) {
			if start+size-1 > a.wm {
				w[start] = true
			}
		}
		return w
	}
	for _, a := range rows {
		switch jn.Type {
		case spec.JoinInterval:
			if !a.hasTs || a.ts < a.wm {
				late++
			}
		case spec.JoinWindow:
			if len(windows(a)) == 0 {
				late++
			}
		}
	}
	for i, a := range rows {
		if a.side != 0 || a.key == "" {
			continue
		}
		for k, b := range rows {
			if b.side != 1 || b.key != a.key || !keep(a.row, b.row) {
				continue
			}
			switch jn.Type {
			case spec.JoinRegular:
				first, second := a, b
				if k < i {
					first, second = b, a
				}
				ttl := ms(jn.TTL)
				if ttl == 0 || !first.hasTs || first.ts+ttl > second.wm {
					out = append(out, render("", a.row, b.row))
				}
			case spec.JoinInterval:
				if !a.hasTs || a.ts < a.wm || !b.hasTs || b.ts < b.wm {
					continue
				}
				if b.ts+ms(jn.Lower) <= a.ts && a.ts <= b.ts+ms(jn.Upper) {
					out = append(out, render("", a.row, b.row))
				}
			case spec.JoinWindow:
				wb := windows(b)
				for start := range windows(a) {
					if wb[start] {
						out = append(out, render(fmt.Sprintf("%d %d", start, start+ms(jn.Window.Size)), a.row, b.row))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out, late
}

// joinCases are the joins the randomized tests run, with the disorder of
// their input.
var joinCases = []struct {
	name string
	jn   spec.Join
}{
	{"regular", spec.Join{Type: spec.JoinRegular}},
	{"regular-ttl", spec.Join{Type: spec.JoinRegular, TTL: winMs(25)}},
	{"regular-ttl-where", spec.Join{Type: spec.JoinRegular, TTL: winMs(40), Where: joinWhere}},
	{"interval", spec.Join{Type: spec.JoinInterval, Lower: -winMs(10), Upper: winMs(5)}},
	{"interval-negative", spec.Join{Type: spec.JoinInterval, Lower: -winMs(20), Upper: -winMs(3), Where: joinWhere}},
	{"interval-positive", spec.Join{Type: spec.JoinInterval, Lower: winMs(0), Upper: winMs(12)}},
	{"window-tumbling", spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowTumbling, Size: winMs(20)}}},
	{"window-sliding", spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowSliding, Size: winMs(30), Slide: winMs(10)}, Where: joinWhere}},
}

// TestJoinBruteForce runs every kind of join over randomized inputs and
// compares the output, as a set of rows, with a nested-loop computation,
// and the late rows counted with the rows the brute force finds late.
func TestJoinBruteForce(t *testing.T) {
	for _, tc := range joinCases {
		for _, keys := range []string{"int", "multi"} {
			for seed := range uint64(3) {
				t.Run(fmt.Sprintf("%s/%s/%d", tc.name, keys, seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 7))
					nkeys := 6 + int(seed)*6
					if tc.jn.Type == spec.JoinRegular && tc.jn.TTL == 0 {
						nkeys *= 8 // every pair of rows of a key matches
					}
					steps := joinGenerate(rng, 120, nkeys, 8)
					want, wantLate := joinBrute(tc.jn, keys, steps)
					// Cleanup buckets of 16ms instead of the default: rows
					// are freed later, which must not change the output.
					for _, coarse := range []bool{false, true} {
						h := newJoinHarness(t, joinOp(tc.jn, keys), joinStreams(t), 0, 128)
						if coarse {
							// And the encodings of dropped keys compacted
							// as soon as they are half of all.
							h.op.(*joinOperator).shift = 4
							h.op.(*joinOperator).keyCompactMin = 1
						}
						for _, s := range steps {
							h.step(s, keys, 0, 128)
						}
						h.finish()
						got := h.out.take()
						slices.Sort(got)
						if !slices.Equal(got, want) {
							t.Fatalf("coarse cleanup %v: %d rows, want %d:\n%s", coarse, len(got), len(want), winDiff(got, want))
						}
						if l := h.counters.LateDropped.Load(); l != int64(wantLate) {
							t.Errorf("coarse cleanup %v: %d late rows, want %d", coarse, l, wantLate)
						}
						j := h.op.(*joinOperator)
						if coarse && keys == "multi" && tc.jn.Type != spec.JoinRegular && j.keyCompactions == 0 {
							t.Error("the encodings of dropped keys were never compacted")
						}
						// Past the last watermark every row of an interval
						// or window join is forgotten and every window
						// fired, and with them every key. (A regular join
						// keeps the rows that have no time.)
						if tc.jn.Type != spec.JoinRegular {
							if n := j.keyCount(); n != 0 {
								t.Errorf("coarse cleanup %v: %d keys left after the last watermark", coarse, n)
							}
							if n := len(j.winMore); n != 0 {
								t.Errorf("coarse cleanup %v: %d keys with windows left after the last watermark", coarse, n)
							}
						}
					}
					if len(want) < 20 {
						t.Fatalf("only %d output rows: the input tests too little", len(want))
					}
					if tc.jn.Type != spec.JoinRegular && wantLate == 0 {
						t.Fatal("no late rows: the input tests too little")
					}
					t.Logf("%d output rows, %d late", len(want), wantLate)
				})
			}
		}
	}
}

// TestJoinInterval spells out the bounds: inclusive at both ends, here
// with a negative lower bound, and late rows.
func TestJoinInterval(t *testing.T) {
	ins := joinStreams(t)
	o := joinOp(spec.Join{Type: spec.JoinInterval, Lower: -winMs(2), Upper: winMs(3),
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"}, spec.Pair{Key: "r", Value: "right.rv"}, spec.Pair{Key: "ts", Value: "left.ts"})}, "")
	h := newJoinHarness(t, o, ins, 0, 128)
	// right at 10 matches left in [8, 13].
	h.side(1, []any{10, "a", 1, "r10", true})
	h.side(0, []any{7, "a", 1, 7, nil}, []any{8, "a", 1, 8, nil}, []any{13, "a", 1, 13, nil}, []any{14, "a", 1, 14, nil},
		[]any{10, "a", 2, 10, nil}, []any{10, "a", nil, 10, nil})
	h.expect("8 r10 8", "13 r10 13")
	if h.out.batches != 1 {
		t.Errorf("%d batches for one input batch, want 1", h.out.batches)
	}
	// left at 13 matches right in [10, 15].
	// right 9 matches left in [7, 12], 15 in [13, 18], 16 in [14, 19].
	h.side(1, []any{9, "a", 1, "r9", nil}, []any{15, "a", 1, "r15", nil}, []any{16, "a", 1, "r16", nil})
	h.expect("7 r9 7", "8 r9 8", "13 r15 13", "14 r15 14", "14 r16 14")
	// At watermark 10 left 7 (kept while wm <= 7+2) is forgotten, left 8
	// is kept; right 9 (kept while wm <= 9+3) is kept. Left 9 is late;
	// left 11 and 10 match right in [8, 13] and [7, 12].
	h.watermark(10)
	h.side(0, []any{9, "a", 1, 9, nil}, []any{11, "a", 1, 11, nil}, []any{10, "a", 1, 100, nil})
	h.expect("11 r10 11", "11 r9 11", "100 r10 10", "100 r9 10")
	if got := h.counters.LateDropped.Load(); got != 1 {
		t.Errorf("%d late rows, want 1", got)
	}
	// The bounds of keeping: a left row is kept while wm <= ts+2 and
	// matches a right row at exactly that watermark; a right row while wm
	// <= ts+3, likewise.
	h.side(0, []any{20, "a", 1, 20, nil})
	h.side(1, []any{30, "a", 1, "r30", nil})
	h.expect()
	h.watermark(22)
	h.side(1, []any{22, "a", 1, "r22", nil})
	h.expect("20 r22 20")
	h.watermark(33)
	h.side(0, []any{33, "a", 1, 33, nil})
	h.expect("33 r30 33")
	h.watermark(34)
	h.side(0, []any{34, "a", 1, 34, nil})
	h.expect()
	j := h.op.(*joinOperator)
	h.watermark(100)
	h.watermark(task.MaxWatermark)
	if n := j.keyCount(); n != 0 {
		t.Errorf("%d keys left after the last watermark", n)
	}
	for s := range j.sides {
		for _, bt := range j.sides[s].batches {
			if bt.rec != nil {
				t.Errorf("side %d still holds a batch of %d rows", s, bt.rec.NumRows())
			}
		}
	}
}

// TestJoinIntervalNegative has both bounds negative: the left row comes
// from before the right one.
func TestJoinIntervalNegative(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinInterval, Lower: -winMs(5), Upper: -winMs(2),
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.ts"}, spec.Pair{Key: "r", Value: "right.rts"})}, "")
	h := newJoinHarness(t, o, joinStreams(t), 0, 128)
	h.side(0, []any{0, "a", 1, 0, nil}, []any{4, "a", 1, 0, nil}, []any{5, "a", 1, 0, nil}, []any{8, "a", 1, 0, nil}, []any{9, "a", 1, 0, nil})
	h.side(1, []any{10, "a", 1, "", nil})
	h.expect("5 10", "8 10")
	// Left 8 is kept while wm <= 8+5; right 10 while wm <= 10-2.
	h.watermark(8)
	h.side(0, []any{8, "a", 1, 0, nil})
	h.expect("8 10")
	h.watermark(9)
	h.side(0, []any{9, "a", 1, 0, nil}, []any{8, "a", 1, 0, nil})
	h.expect()
	// Right 13 matches left in [8, 11], 14 in [9, 12]; left 4 is still
	// kept (wm <= 4+5) but matches neither.
	h.side(1, []any{13, "a", 1, "", nil}, []any{14, "a", 1, "", nil})
	h.expect("8 13", "9 13", "8 13", "9 13", "9 14", "9 14")
	if got := h.counters.LateDropped.Load(); got != 1 {
		t.Errorf("%d late rows, want 1", got)
	}
}

// TestJoinRegularTTL spells out the ttl: a row is kept while ts+ttl > wm
// and not kept at all if it comes later; a null event time keeps it.
func TestJoinRegularTTL(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinRegular, TTL: winMs(10),
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"}, spec.Pair{Key: "r", Value: "right.rv"})}, "")
	h := newJoinHarness(t, o, joinStreams(t), 0, 128)
	h.side(0, []any{5, "a", 1, 5, nil}, []any{12, "a", 1, 12, nil}, []any{nil, "a", 1, 0, nil})
	h.watermark(14)
	h.side(1, []any{1, "a", 1, "r1", nil}, []any{30, "a", 1, "r30", nil})
	h.expect("5 r1", "12 r1", "0 r1", "5 r30", "12 r30", "0 r30")
	h.watermark(15) // left 5 is forgotten
	h.side(1, []any{2, "a", 1, "r2", nil})
	h.expect("12 r2", "0 r2")
	h.side(0, []any{40, "a", 1, 40, nil})
	h.expect("40 r30") // r1 (ttl passed at 11) is not kept; r2 never was
	h.watermark(22)    // left 12 is forgotten
	h.side(1, []any{50, "a", 1, "r50", nil})
	h.expect("0 r50", "40 r50")
	if got := h.counters.LateDropped.Load(); got != 0 {
		t.Errorf("%d late rows, want 0", got)
	}
}

// TestJoinWindow spells out a tumbling window join.
func TestJoinWindow(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinWindow, Window: &spec.Window{Type: spec.WindowTumbling, Size: winMs(10)},
		Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"}, spec.Pair{Key: "k", Value: "left.k2"}, spec.Pair{Key: "r", Value: "right.rv"})}, "")
	h := newJoinHarness(t, o, joinStreams(t), 0, 128)
	h.side(0, []any{1, "a", 2, 1, nil}, []any{9, "a", 2, 9, nil}, []any{10, "a", 2, 10, nil}, []any{3, "a", 1, 3, nil}, []any{-1, "a", 1, -1, nil})
	h.side(1, []any{5, "a", 2, "x", nil}, []any{0, "a", 1, "y", nil}, []any{19, "a", 2, "z", nil}, []any{-5, "a", 1, "w", nil})
	h.expect()
	h.watermark(8)
	h.expect("-10 0 -1 1 w")
	h.watermark(9)
	h.expect("0 10 3 1 y", "0 10 1 2 x", "0 10 9 2 x")
	h.side(0, []any{9, "a", 2, 99, nil}, []any{12, "a", 2, 12, nil})
	h.side(1, []any{nil, "a", 2, "n", nil})
	if got := h.counters.LateDropped.Load(); got != 2 {
		t.Errorf("%d late rows, want 2", got)
	}
	h.watermark(task.MaxWatermark)
	h.expect("10 20 10 2 z", "10 20 12 2 z")
	if err := h.op.Finish(); err != nil {
		t.Fatal(err)
	}
	h.expect()
}

// TestJoinKeyGroups checks that a row of a key group the subtask does not
// own is refused before anything changes.
func TestJoinKeyGroups(t *testing.T) {
	kg := joinRowGroup([]any{0, "a", 1}, "")
	start := (kg + 1) % 128
	o := joinOp(spec.Join{Type: spec.JoinRegular}, "")
	h := newJoinHarness(t, o, joinStreams(t), start, start+1)
	err := h.sideErr(1, []any{0, "a", 1, "x", nil})
	want := fmt.Sprintf("join j: process right batch: row 0 has key group %d, outside this subtask's key groups [%d, %d): the input is not partitioned by join.right.keyBy", kg, start, start+1)
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

// TestJoinBatches checks that a batch's pairs go out as one batch and that
// a large cross product is cut into batches of joinBatchRows.
func TestJoinBatches(t *testing.T) {
	o := joinOp(spec.Join{Type: spec.JoinRegular, Columns: spec.NewOrderedMap(spec.Pair{Key: "l", Value: "left.lv"})}, "")
	h := newJoinHarness(t, o, joinStreams(t), 0, 128)
	left := make([][]any, 300)
	for i := range left {
		left[i] = []any{i, "a", 1, i, nil}
	}
	h.side(0, left...)
	right := make([][]any, 300)
	for i := range right {
		right[i] = []any{i, "a", 1 + i%2, "", nil}
	}
	h.side(1, right...)
	if got := len(h.out.take()); got != 150*300 || h.out.batches != 1 {
		t.Fatalf("%d rows in %d batches, want %d in 1", got, h.out.batches, 150*300)
	}
	h.side(1, right...)
	h.side(1, right...)
	if got := len(h.out.take()); got != 2*150*300 || h.out.batches != 3 {
		t.Fatalf("%d rows in %d batches, want %d in 3", got, h.out.batches, 2*150*300)
	}
	right = slices.Repeat(right, 2)
	h.out.batches = 0
	h.side(1, right...)
	if got := len(h.out.take()); got != 300*300 || h.out.batches != 2 {
		t.Fatalf("%d rows in %d batches, want %d in 2", got, h.out.batches, 300*300)
	}
}

// joinBenchBids returns batches of bids (auction, price, bidder, dateTime,
// extra) in event time order, 100 per millisecond, and their stream.
func joinBenchBids(b *testing.B, mem memory.Allocator, batches, rows int, keys int64) (Stream, []arrow.RecordBatch) {
	s, err := arrowfmt.NewSchema([]arrowfmt.Field{
		{Name: "auction", Type: arrowfmt.Int64}, {Name: "price", Type: arrowfmt.Int64}, {Name: "bidder", Type: arrowfmt.Int64},
		{Name: "dateTime", Type: arrowfmt.TimestampMs}, {Name: "extra", Type: arrowfmt.String},
	})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]arrow.RecordBatch, batches)
	extra := strings.Repeat("x", 32)
	n := int64(0)
	for i := range out {
		rb := array.NewRecordBuilder(mem, s)
		for range rows {
			n++
			rb.Field(0).(*array.Int64Builder).Append(rng.Int64N(1000))
			rb.Field(1).(*array.Int64Builder).Append(rng.Int64N(keys))
			rb.Field(2).(*array.Int64Builder).Append(rng.Int64N(1000))
			rb.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(n / 100))
			rb.Field(4).(*array.StringBuilder).Append(extra)
		}
		out[i] = rb.NewRecordBatch()
		rb.Release()
	}
	return Stream{Schema: s, TimeColumn: 3}, out
}

type joinDiscard struct{ rows int64 }

func (d *joinDiscard) Emit(b arrow.RecordBatch) error {
	d.rows += b.NumRows()
	return nil
}

// benchJoin feeds bid batches to the left input of jn, keyed by price,
// and after every tenth batch one row of the right input (a bid of that
// batch, as a stand-in for Nexmark q7's highest bid of a window) and the
// watermark max_ts - bound - 1.
func benchJoin(b *testing.B, jn spec.Join, keys int64, bound int64) {
	for _, backend := range []string{"heap", "pebble"} {
		b.Run(backend, func(b *testing.B) { benchJoinOn(b, backend == "pebble", jn, keys, bound) })
	}
}

// benchJoinOn is benchJoin on the heap or on pebble (a store of 64 MiB).
func benchJoinOn(b *testing.B, store bool, jn spec.Join, keys int64, bound int64) {
	mem := memory.NewGoAllocator()
	const rowsPerBatch = 1024
	in, base := joinBenchBids(b, mem, 256, rowsPerBatch, keys)
	defer func() {
		for _, bt := range base {
			bt.Release()
		}
	}()
	jn.Left = spec.JoinSide{Input: "bid", KeyBy: []string{"price"}}
	jn.Right = spec.JoinSide{Input: "max", KeyBy: []string{"price"}}
	jn.Columns = spec.NewOrderedMap(spec.Pair{Key: "auction", Value: "left.auction"}, spec.Pair{Key: "price", Value: "left.price"},
		spec.Pair{Key: "bidder", Value: "left.bidder"}, spec.Pair{Key: "dateTime", Value: "left.dateTime"}, spec.Pair{Key: "extra", Value: "left.extra"})
	var st *spec.State
	if store {
		st = &spec.State{Backend: spec.StatePebble, Memory: 64 << 20}
	}
	op, err := NewJoinState(&spec.Operator{Name: "q", Join: &jn}, in, in, st, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	out := &joinDiscard{}
	if err := op.Open(&task.Context{Mem: mem, Out: out, MaxParallelism: 128}); err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	two := op.(task.TwoInputOperator)
	// Event time goes on from round to round of the input: each round is
	// the input shifted by its span.
	span := int64(len(base)*rowsPerBatch/100) + 1
	cur := base
	release := func() {
		if &cur[0] != &base[0] {
			for _, bt := range cur {
				bt.Release()
			}
		}
	}
	defer release()
	rows := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(base)
		if k == 0 && i > 0 {
			b.StopTimer()
			release()
			cur = make([]arrow.RecordBatch, len(base))
			for j, bt := range base {
				cur[j] = joinShift(mem, bt, 3, int64(i/len(base))*span)
			}
			b.StartTimer()
		}
		bt := cur[k]
		if err := two.ProcessBatchFrom(0, bt); err != nil {
			b.Fatal(err)
		}
		rows += int(bt.NumRows())
		if k%10 == 9 {
			right := bt.NewSlice(bt.NumRows()-1, bt.NumRows())
			if err := two.ProcessBatchFrom(1, right); err != nil {
				b.Fatal(err)
			}
			right.Release()
			ts := bt.Column(3).(*array.Timestamp)
			if err := op.ProcessWatermark(int64(ts.Value(ts.Len()-1)) - bound - 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(out.rows)/float64(max(rows, 1)), "out/row")
}

// joinShift returns bt with delta added to its time column col.
func joinShift(mem memory.Allocator, bt arrow.RecordBatch, col int, delta int64) arrow.RecordBatch {
	ts := bt.Column(col).(*array.Timestamp)
	tb := array.NewTimestampBuilder(mem, ts.DataType().(*arrow.TimestampType))
	defer tb.Release()
	for i := range ts.Len() {
		tb.Append(ts.Value(i) + arrow.Timestamp(delta))
	}
	arr := tb.NewArray()
	defer arr.Release()
	cols := slices.Clone(bt.Columns())
	cols[col] = arr
	return array.NewRecordBatch(bt.Schema(), cols, bt.NumRows())
}

// BenchmarkIntervalJoin is Nexmark q7's join: every bid is kept for 10s
// of event time (1M rows at 100 per millisecond) and probed by the rare
// window results, keyed by price (nearly every bid its own key).
func BenchmarkIntervalJoin(b *testing.B) {
	benchJoin(b, spec.Join{Type: spec.JoinInterval, Lower: -spec.Duration(10 * time.Second), Upper: 0}, 1<<40, 50)
}

// BenchmarkRegularJoin keeps every row for a ttl of 10s (1M rows) over
// 100K keys, about ten rows per key.
func BenchmarkRegularJoin(b *testing.B) {
	benchJoin(b, spec.Join{Type: spec.JoinRegular, TTL: spec.Duration(10 * time.Second)}, 100_000, 50)
}

// keyCount returns the keys the join's tables hold.
func (j *joinOperator) keyCount() int {
	n := 0
	for i := range j.groups {
		n += j.groups[i].n
	}
	return n
}
