package builtin

import (
	"errors"
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/task"
)

// FilterSchema checks op's filter expression against in and returns the
// stream the filter emits: in itself, since a filter only drops rows.
func FilterSchema(op *spec.Operator, in Stream) (Stream, error) {
	if _, err := compileFilter(op, in); err != nil {
		return Stream{}, err
	}
	return in, nil
}

// SelectSchema checks op's select expressions against in and returns the
// stream the select emits: one column per entry, in order, typed by the
// expression (int → int64, float → float64, string, bool, time.Time →
// timestamp_ms). An entry that is just an input column's name keeps that
// column's type. The output carries event time when the input's time
// column is selected unchanged, under any name.
func SelectSchema(op *spec.Operator, in Stream) (Stream, error) {
	p, err := compileSelect(op, in)
	if err != nil {
		return Stream{}, err
	}
	return p.out, nil
}

// NewFilter returns the operator that keeps the rows of each batch for
// which op.Filter is true.
func NewFilter(op *spec.Operator, in Stream) (task.Operator, error) {
	e, err := compileFilter(op, in)
	if err != nil {
		return nil, err
	}
	return &filterOp{field: filterField(op), e: e}, nil
}

// NewSelect returns the operator that computes op.Select's columns from
// each batch.
func NewSelect(op *spec.Operator, in Stream) (task.Operator, error) {
	p, err := compileSelect(op, in)
	if err != nil {
		return nil, err
	}
	return &selectOp{plan: p}, nil
}

func filterField(op *spec.Operator) string { return fmt.Sprintf("operators[%s].filter", op.Name) }

func compileFilter(op *spec.Operator, in Stream) (*compiledExpr, error) {
	field := filterField(op)
	e, err := compileExpr(field, op.Filter, in)
	if err != nil {
		return nil, err
	}
	if !e.kindOK || e.kind != exBool {
		return nil, spec.Errorf(field, "expression %q: filter must be a boolean expression, got %s", op.Filter, exprTypeName(e.typ))
	}
	return e, nil
}

// selectPlan is a select compiled against its input.
type selectPlan struct {
	out    Stream
	fields []string // spec field of each output column, for logs
	exprs  []*compiledExpr
}

// compileSelect compiles every entry of op.Select and reports all the
// entries that fail.
func compileSelect(op *spec.Operator, in Stream) (*selectPlan, error) {
	base := fmt.Sprintf("operators[%s].select", op.Name)
	if op.Select.Len() == 0 {
		return nil, spec.Errorf(base, "no columns: want name: expression entries")
	}
	p := &selectPlan{out: Stream{TimeColumn: -1}}
	fields := make([]arrowfmt.Field, op.Select.Len())
	var errs []error
	for i, name := range op.Select.Keys {
		field := base + "." + name
		src := op.Select.Values[i]
		e, err := compileExpr(field, src, in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case e.ident >= 0:
			t, err := arrowfmt.TypeOf(in.Schema.Field(e.ident).Type)
			if err != nil {
				errs = append(errs, spec.Errorf(field, "%w", err))
				continue
			}
			fields[i] = arrowfmt.Field{Name: name, Type: t}
			if e.ident == in.TimeColumn && !p.out.HasTime() {
				p.out.TimeColumn, p.out.TimeOffset = i, in.TimeOffset
			}
		case e.kindOK:
			fields[i] = arrowfmt.Field{Name: name, Type: e.kind.arrowType()}
		default:
			errs = append(errs, spec.Errorf(field, "expression %q has type %s: want a number, string, bool or time", src, exprTypeName(e.typ)))
			continue
		}
		p.fields = append(p.fields, field)
		p.exprs = append(p.exprs, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	schema, err := arrowfmt.NewSchema(fields)
	if err != nil {
		return nil, spec.Errorf(base, "%w", err)
	}
	p.out.Schema = schema
	return p, nil
}

// exprFailures logs the first row an operator's expression failed on; such
// rows are null, and a failing expression would otherwise log every batch.
type exprFailures struct {
	log    *slog.Logger
	rows   int64
	logged bool
}

func (f *exprFailures) note(field, src string, rows int, err error) {
	if rows == 0 {
		return
	}
	f.rows += int64(rows)
	if f.logged {
		return
	}
	f.logged = true
	f.log.Warn("expression failed; its rows are treated as null (further failures are not logged)",
		"field", field, "expression", src, "rows", rows, "error", err)
}

func exprLogger(ctx *task.Context) *slog.Logger {
	if ctx.Logger != nil {
		return ctx.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func exprMem(ctx *task.Context) memory.Allocator {
	if ctx.Mem != nil {
		return ctx.Mem
	}
	return memory.DefaultAllocator
}

type filterOp struct {
	field string
	e     *compiledExpr
	// useVM evaluates every row with the VM (tests and benchmarks).
	useVM bool

	out      task.Output
	mem      memory.Allocator
	failures exprFailures
	sel      []int32
}

var _ task.Operator = (*filterOp)(nil)

func (f *filterOp) Open(ctx *task.Context) error {
	f.out, f.mem = ctx.Out, exprMem(ctx)
	f.failures.log = exprLogger(ctx)
	return nil
}

// ProcessBatch emits the kept rows of b: b itself when all are kept, a
// zero-copy slice when they are contiguous, nothing when none are.
func (f *filterOp) ProcessBatch(b arrow.RecordBatch) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	res, valid, failed, err := f.e.eval(b, f.useVM)
	f.failures.note(f.field, f.e.src, failed, err)
	sel := exprGrow(&f.sel, n)
	j := 0
	keep := res.b[:n]
	if valid == nil {
		for i, k := range keep {
			sel[j] = int32(i)
			if k {
				j++
			}
		}
	} else {
		valid = valid[:n]
		for i, k := range keep {
			sel[j] = int32(i)
			if k && valid[i] {
				j++
			}
		}
	}
	sel = sel[:j]
	switch {
	case j == 0:
		return nil
	case j == n:
		return f.out.Emit(b)
	case int(sel[j-1]-sel[0]) == j-1:
		s := b.NewSlice(int64(sel[0]), int64(sel[j-1])+1)
		defer s.Release()
		return f.out.Emit(s)
	}
	rec := arrowfmt.Take(b, sel, f.mem)
	defer rec.Release()
	return f.out.Emit(rec)
}

func (f *filterOp) ProcessWatermark(int64) error { return nil }
func (f *filterOp) Finish() error                { return nil }
func (f *filterOp) Close() error                 { return nil }

type selectOp struct {
	plan *selectPlan
	// useVM evaluates every row with the VM (tests and benchmarks).
	useVM bool

	out      task.Output
	failures exprFailures
	builders []array.Builder // per output column; nil for reused input columns
	cols     []arrow.Array
}

var _ task.Operator = (*selectOp)(nil)

func (s *selectOp) Open(ctx *task.Context) error {
	s.out = ctx.Out
	s.failures.log = exprLogger(ctx)
	mem := exprMem(ctx)
	s.builders = make([]array.Builder, len(s.plan.exprs))
	for i, e := range s.plan.exprs {
		if e.ident < 0 {
			s.builders[i] = array.NewBuilder(mem, s.plan.out.Schema.Field(i).Type)
		}
	}
	return nil
}

// ProcessBatch emits one batch with the selected columns of b. A column
// that is just an input column is the input's array, retained.
func (s *selectOp) ProcessBatch(b arrow.RecordBatch) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	cols := s.cols[:0]
	defer func() {
		for i, c := range cols {
			c.Release()
			cols[i] = nil
		}
		s.cols = cols[:0]
	}()
	for i, e := range s.plan.exprs {
		if e.ident >= 0 {
			c := b.Column(e.ident)
			c.Retain()
			cols = append(cols, c)
			continue
		}
		res, valid, failed, err := e.eval(b, s.useVM)
		s.failures.note(s.plan.fields[i], e.src, failed, err)
		cols = append(cols, selectArray(s.builders[i], res, valid, n))
	}
	rec := array.NewRecordBatch(s.plan.out.Schema, cols, int64(n))
	defer rec.Release()
	return s.out.Emit(rec)
}

// selectArray builds the first n values of res into an array.
func selectArray(bld array.Builder, res *exprVec, valid []bool, n int) arrow.Array {
	if valid != nil {
		valid = valid[:n]
	}
	switch b := bld.(type) {
	case *array.Int64Builder:
		b.AppendValues(res.i[:n], valid)
	case *array.Float64Builder:
		b.AppendValues(res.f[:n], valid)
	case *array.BooleanBuilder:
		b.AppendValues(res.b[:n], valid)
	case *array.StringBuilder:
		b.AppendValues(res.s[:n], valid)
	case *array.TimestampBuilder:
		ts := unsafe.Slice((*arrow.Timestamp)(unsafe.SliceData(res.i)), n)
		b.AppendValues(ts, valid)
	default:
		panic(fmt.Sprintf("builtin: select: unexpected builder %T", bld))
	}
	return bld.NewArray()
}

func (s *selectOp) ProcessWatermark(int64) error { return nil }
func (s *selectOp) Finish() error                { return nil }

func (s *selectOp) Close() error {
	for i, b := range s.builders {
		if b != nil {
			b.Release()
			s.builders[i] = nil
		}
	}
	return nil
}
