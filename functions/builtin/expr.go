package builtin

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/weirstream/weir/arrowfmt"
	"github.com/weirstream/weir/functions/spec"
)

// exprKind is the kind of the values an expression computes.
type exprKind uint8

const (
	exInt    exprKind = iota // expr's int; int64 and timestamp_ms columns
	exFloat                  // float64
	exBool                   // bool
	exString                 // string
	exTime                   // time.Time results (VM only), kept as Unix ms
)

func (k exprKind) String() string {
	switch k {
	case exInt:
		return "int"
	case exFloat:
		return "float"
	case exBool:
		return "bool"
	case exString:
		return "string"
	case exTime:
		return "time"
	}
	return fmt.Sprintf("exprKind(%d)", uint8(k))
}

// arrowType is the weir column type select writes for a result of kind k.
func (k exprKind) arrowType() arrowfmt.Type {
	switch k {
	case exInt:
		return arrowfmt.Int64
	case exFloat:
		return arrowfmt.Float64
	case exBool:
		return arrowfmt.Bool
	case exString:
		return arrowfmt.String
	}
	return arrowfmt.TimestampMs
}

var exprTimeType = reflect.TypeFor[time.Time]()

// exprResultKind maps the static type of an expression to the kind it is
// stored as; ok is false for types a column cannot hold (any, arrays, maps).
func exprResultKind(t reflect.Type) (exprKind, bool) {
	if t == nil {
		return 0, false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return exInt, true
	case reflect.Float32, reflect.Float64:
		return exFloat, true
	case reflect.String:
		return exString, true
	case reflect.Bool:
		return exBool, true
	}
	if t == exprTimeType {
		return exTime, true
	}
	return 0, false
}

// exprTypeName names a static type in error messages.
func exprTypeName(t reflect.Type) string {
	if t == nil || t.Kind() == reflect.Interface {
		return "any"
	}
	return t.String()
}

// exprExactKind is the kind of a node the vectorised path handles: exactly
// int, float64, string or bool.
func exprExactKind(t reflect.Type) (exprKind, bool) {
	if t == nil {
		return 0, false
	}
	switch t.Kind() {
	case reflect.Int:
		return exInt, true
	case reflect.Float64:
		return exFloat, true
	case reflect.String:
		return exString, true
	case reflect.Bool:
		return exBool, true
	}
	return 0, false
}

// exprColumn is an input column seen as an expression variable.
type exprColumn struct {
	name string
	kind exprKind // exInt for int64 and timestamp_ms
}

// exprColumns returns the variables of schema and the environment the
// checker types them with.
func exprColumns(field string, schema *arrow.Schema) ([]exprColumn, map[string]any, error) {
	cols := make([]exprColumn, schema.NumFields())
	env := make(map[string]any, len(cols))
	for i, f := range schema.Fields() {
		t, err := arrowfmt.TypeOf(f.Type)
		if err != nil {
			return nil, nil, spec.Errorf(field, "input column %q: %w", f.Name, err)
		}
		c := exprColumn{name: f.Name}
		switch t {
		case arrowfmt.Int64, arrowfmt.TimestampMs:
			c.kind, env[f.Name] = exInt, 0
		case arrowfmt.Float64:
			c.kind, env[f.Name] = exFloat, 0.0
		case arrowfmt.String:
			c.kind, env[f.Name] = exString, ""
		case arrowfmt.Bool:
			c.kind, env[f.Name] = exBool, false
		}
		cols[i] = c
	}
	return cols, env, nil
}

// compiledExpr is one expression compiled against an input stream, with the
// buffers to evaluate it. It belongs to one operator instance.
type compiledExpr struct {
	src  string
	prog *vm.Program
	typ  reflect.Type // static result type
	kind exprKind     // valid when kindOK
	// kindOK reports whether typ is one a column can hold.
	kindOK bool
	// ident is the input column when the expression is just its name, else -1.
	ident int
	// refs are the input columns the expression reads: a null in any of them
	// makes the result null.
	refs []int
	cols []exprColumn
	// vec is the vectorised plan; nil when the VM evaluates every row.
	vec exprNode

	batch   exprBatch
	machine vm.VM
	env     map[string]any
	out     exprVec
	valid   []bool
}

// exprError is the problem of an expression that does not compile, on one
// line: the library's message and where in the expression, without its
// multi-line snippet (the message quotes the expression).
func exprError(field, src string, err error) error {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return spec.Errorf(field, "expression %q: %w", src, err)
	}
	at := fmt.Sprintf("column %d", fe.Column+1)
	if strings.Contains(src, "\n") {
		at = fmt.Sprintf("line %d, column %d", fe.Line, fe.Column+1)
	}
	return spec.Errorf(field, "expression %q: %s at %s", src, fe.Message, at)
}

// compileExpr parses and type-checks src against in. field names the spec
// field in errors. It does not check the result type.
func compileExpr(field, src string, in Stream) (*compiledExpr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, spec.Errorf(field, "empty expression")
	}
	cols, env, err := exprColumns(field, in.Schema)
	if err != nil {
		return nil, err
	}
	prog, err := expr.Compile(src, expr.Env(env))
	if err != nil {
		return nil, exprError(field, src, err)
	}
	node := prog.Node()
	e := &compiledExpr{
		src:   src,
		prog:  prog,
		typ:   node.Type(),
		ident: -1,
		cols:  cols,
		env:   env,
		batch: exprBatch{cols: cols, vals: make([]exprVec, len(cols)), loaded: make([]bool, len(cols))},
	}
	e.kind, e.kindOK = exprResultKind(e.typ)

	index := make(map[string]int, len(cols))
	for i, c := range cols {
		index[c.name] = i
	}
	if id, ok := node.(*ast.IdentifierNode); ok {
		if i, ok := index[id.Value]; ok {
			e.ident = i
		}
	}
	// The null rule follows what the user wrote, not what the optimizer
	// left: tip > 0 || true reads tip.
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, exprError(field, src, err)
	}
	refs := &exprRefs{cols: index, seen: make([]bool, len(cols))}
	ast.Walk(&tree.Node, refs)
	for i, seen := range refs.seen {
		if seen || refs.all {
			e.refs = append(e.refs, i)
		}
	}

	p := &exprPlanner{cols: index, kinds: make([]exprKind, len(cols))}
	for i, c := range cols {
		p.kinds[i] = c.kind
	}
	if nd, k, ok := p.plan(node); ok && e.kindOK && k == e.kind {
		e.vec = nd
	}
	return e, nil
}

// exprRefs collects the columns an expression reads; $env reads them all.
type exprRefs struct {
	cols map[string]int
	seen []bool
	all  bool
}

func (r *exprRefs) Visit(n *ast.Node) {
	id, ok := (*n).(*ast.IdentifierNode)
	if !ok {
		return
	}
	if id.Value == "$env" {
		r.all = true
	} else if i, ok := r.cols[id.Value]; ok {
		r.seen[i] = true
	}
}

// eval evaluates e over rec, with the VM for every row when useVM is set
// (or when e has no vectorised plan). It returns one value per row of rec
// and the rows whose value is valid (nil: all are); the result is owned by
// e and valid until the next call. failed counts the rows whose evaluation
// failed and firstErr describes the first.
func (e *compiledExpr) eval(rec arrow.RecordBatch, useVM bool) (res *exprVec, valid []bool, failed int, firstErr error) {
	n := int(rec.NumRows())
	e.batch.reset(rec)
	valid = e.inputValid(rec, n)
	if e.vec == nil || useVM {
		return e.evalVM(n, valid)
	}
	v := exprFull(e.vec.eval(&e.batch), n)
	if v.bad != nil {
		if valid == nil {
			valid = exprGrow(&e.valid, n)
			for i := range valid {
				valid[i] = true
			}
		}
		for i, bad := range v.bad[:n] {
			if bad && valid[i] {
				valid[i] = false
				if failed == 0 {
					firstErr = fmt.Errorf("row %d: integer divide by zero", i)
				}
				failed++
			}
		}
	}
	return v, valid, failed, firstErr
}

// inputValid returns the rows in which every column e reads is non-null, or
// nil when all are.
func (e *compiledExpr) inputValid(rec arrow.RecordBatch, n int) []bool {
	var valid []bool
	for _, c := range e.refs {
		col := rec.Column(c)
		if col.NullN() == 0 {
			continue
		}
		first := valid == nil
		if first {
			valid = exprGrow(&e.valid, n)
		}
		exprValidity(valid, col.NullBitmapBytes(), col.Data().Offset(), first)
	}
	return valid
}

// exprBitBytes[b] has byte k set to 1 when bit k of b is: eight bools.
var exprBitBytes = func() (t [256]uint64) {
	for b := range t {
		for k := range 8 {
			if b&(1<<k) != 0 {
				t[b] |= 1 << (8 * k)
			}
		}
	}
	return t
}()

// exprValidity sets valid to the validity bitmap bits starting at bit off
// (first) or ands it in, eight rows at a time when the bitmap is aligned.
func exprValidity(valid []bool, bits []byte, off int, first bool) {
	i := 0
	if words := exprWords(valid); off%8 == 0 && words != nil {
		bits := bits[off/8:]
		if first {
			for j := range words {
				words[j] = exprBitBytes[bits[j]]
			}
		} else {
			for j := range words {
				words[j] &= exprBitBytes[bits[j]]
			}
		}
		i = len(words) * 8
	}
	for ; i < len(valid); i++ {
		bit := bits[(off+i)/8]&(1<<((off+i)%8)) != 0
		valid[i] = bit && (first || valid[i])
	}
}

// evalVM runs the program once per valid row.
func (e *compiledExpr) evalVM(n int, valid []bool) (*exprVec, []bool, int, error) {
	out := &e.out
	out.size(e.kind, n)
	failed := 0
	var firstErr error
	fail := func(r int, err error) {
		if valid == nil {
			valid = exprGrow(&e.valid, n)
			for i := range valid {
				valid[i] = true
			}
		}
		valid[r] = false
		if failed == 0 {
			firstErr = fmt.Errorf("row %d: %w", r, err)
		}
		failed++
	}
	for r := range n {
		if valid != nil && !valid[r] {
			continue
		}
		for _, c := range e.refs {
			v := e.batch.column(c)
			name := e.cols[c].name
			switch v.kind {
			case exInt:
				e.env[name] = int(v.i[r])
			case exFloat:
				e.env[name] = v.f[r]
			case exBool:
				e.env[name] = v.b[r]
			case exString:
				e.env[name] = v.s[r]
			}
		}
		got, err := e.machine.Run(e.prog, e.env)
		if err != nil {
			fail(r, err)
			continue
		}
		if !out.store(r, got) {
			fail(r, fmt.Errorf("result %v of type %T is not %s", got, got, e.kind))
		}
	}
	return out, valid, failed, firstErr
}

// exprVec holds one kind of values for a batch, a column at a time: the
// slice of its kind is set. A konst (a literal) has one value for all rows.
type exprVec struct {
	kind  exprKind
	konst bool
	i     []int64 // exInt, exTime
	f     []float64
	b     []bool
	s     []string
	// bad marks the rows whose evaluation failed; nil when none did. It has
	// short-circuit semantics: false && (1 % 0 == 0) is false, not failed.
	bad []bool
	// wide caches a konst repeated for every row.
	wide *exprVec
}

func (v *exprVec) len() int {
	switch v.kind {
	case exFloat:
		return len(v.f)
	case exBool:
		return len(v.b)
	case exString:
		return len(v.s)
	}
	return len(v.i)
}

// size makes v a non-konst vector of n values of kind k, reusing its
// buffers.
func (v *exprVec) size(k exprKind, n int) {
	v.kind, v.konst, v.bad = k, false, nil
	switch k {
	case exInt, exTime:
		exprGrow(&v.i, n)
	case exFloat:
		exprGrow(&v.f, n)
	case exBool:
		exprGrow(&v.b, n)
	case exString:
		exprGrow(&v.s, n)
	}
}

// store converts a VM result into row r; false if it does not convert.
func (v *exprVec) store(r int, x any) bool {
	switch v.kind {
	case exInt:
		i, ok := exprToInt(x)
		v.i[r] = i
		return ok
	case exFloat:
		f, ok := exprToFloat(x)
		v.f[r] = f
		return ok
	case exBool:
		b, ok := x.(bool)
		if !ok {
			if rv := reflect.ValueOf(x); rv.Kind() == reflect.Bool {
				b, ok = rv.Bool(), true
			}
		}
		v.b[r] = b
		return ok
	case exString:
		s, ok := x.(string)
		if !ok {
			if rv := reflect.ValueOf(x); rv.Kind() == reflect.String {
				s, ok = rv.String(), true
			}
		}
		v.s[r] = s
		return ok
	case exTime:
		t, ok := x.(time.Time)
		v.i[r] = t.UnixMilli()
		return ok
	}
	return false
}

// exprToInt converts a number the VM returned for an int-typed expression.
// Floats are truncated: max(1, 2.5) is typed int by the checker.
func exprToInt(x any) (int64, bool) {
	switch x := x.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint:
		return int64(x), true
	case uint64:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint8:
		return int64(x), true
	case float64:
		return int64(x), true
	case float32:
		return int64(x), true
	}
	// Named types such as time.Duration.
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint()), true
	case reflect.Float32, reflect.Float64:
		return int64(v.Float()), true
	}
	return 0, false
}

func exprToFloat(x any) (float64, bool) {
	switch x := x.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	if v := reflect.ValueOf(x); v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64 {
		return v.Float(), true
	}
	if i, ok := exprToInt(x); ok {
		return float64(i), true
	}
	return 0, false
}

// exprGrow sets *p to length n, reallocating only when it is too small.
func exprGrow[T any](p *[]T, n int) []T {
	if cap(*p) < n {
		*p = make([]T, n, n+n/4)
	}
	*p = (*p)[:n]
	return *p
}

// exprFull returns v with a value for each of n rows: v itself, or its
// konst repeated.
func exprFull(v *exprVec, n int) *exprVec {
	if !v.konst {
		return v
	}
	if v.wide == nil {
		v.wide = &exprVec{kind: v.kind}
	}
	w := v.wide
	if w.len() == n {
		return w
	}
	switch v.kind {
	case exInt:
		exprRepeat(&w.i, v.i[0], n)
	case exFloat:
		exprRepeat(&w.f, v.f[0], n)
	case exBool:
		exprRepeat(&w.b, v.b[0], n)
	case exString:
		exprRepeat(&w.s, v.s[0], n)
	}
	return w
}

// exprRepeat sets *p to n copies of x, filling the whole capacity once so
// that a later, longer length can be resliced.
func exprRepeat[T any](p *[]T, x T, n int) {
	if cap(*p) < n {
		*p = make([]T, n, n+n/4)
		full := (*p)[:cap(*p)]
		for i := range full {
			full[i] = x
		}
	}
	*p = (*p)[:n]
}

// exprBatch gives the vectorised nodes the columns of one batch, loaded
// when first read.
type exprBatch struct {
	n      int
	rec    arrow.RecordBatch
	cols   []exprColumn
	vals   []exprVec
	loaded []bool
}

func (x *exprBatch) reset(rec arrow.RecordBatch) {
	x.rec = rec
	x.n = int(rec.NumRows())
	clear(x.loaded)
}

// column returns column c of the batch. Int64 and float64 columns are the
// Arrow buffers themselves: nodes never write into a column.
func (x *exprBatch) column(c int) *exprVec {
	v := &x.vals[c]
	if x.loaded[c] {
		return v
	}
	x.loaded[c] = true
	v.kind = x.cols[c].kind
	switch a := x.rec.Column(c).(type) {
	case *array.Int64:
		v.i = a.Int64Values()
	case *array.Timestamp:
		ts := a.TimestampValues()
		v.i = unsafe.Slice((*int64)(unsafe.SliceData(ts)), len(ts))
	case *array.Float64:
		v.f = a.Float64Values()
	case *array.Boolean:
		out := exprGrow(&v.b, x.n)
		for i := range out {
			out[i] = a.Value(i)
		}
	case *array.String:
		out := exprGrow(&v.s, x.n)
		offs := a.ValueOffsets()[:len(out)+1]
		data := a.ValueBytes()
		all, base := unsafe.String(unsafe.SliceData(data), len(data)), offs[0]
		for i := range out {
			out[i] = all[offs[i]-base : offs[i+1]-base]
		}
	default:
		panic(fmt.Sprintf("builtin: column %q: unexpected array %T", x.cols[c].name, a))
	}
	return v
}

// exprNode is a node of a vectorised plan. eval returns the node's values
// for every row of the batch (owned by the node, valid until the next
// eval); only *exprConst returns a konst.
type exprNode interface {
	eval(x *exprBatch) *exprVec
}

// exprPlanner turns a checked expr syntax tree into a vectorised plan.
type exprPlanner struct {
	cols  map[string]int
	kinds []exprKind
}

// plan returns the vectorised node for n and its kind, or ok=false when
// some node in n is not supported. A node whose operands are all constants
// is folded into a constant.
func (p *exprPlanner) plan(n ast.Node) (exprNode, exprKind, bool) {
	nd, k, ok := p.node(n)
	if !ok {
		return nil, 0, false
	}
	// The checker's type must be ours, or the two paths would disagree.
	if want, ok := exprExactKind(n.Type()); !ok || want != k {
		return nil, 0, false
	}
	return nd, k, true
}

// exprFold replaces nd by its value when all its operands are constants;
// a constant that fails (10 % abs(0)) becomes an exprFail.
func exprFold(nd exprNode, k exprKind, operands ...exprNode) (exprNode, exprKind, bool) {
	for _, o := range operands {
		if _, ok := o.(*exprConst); !ok {
			return nd, k, true
		}
	}
	v := nd.eval(&exprBatch{n: 1})
	if v.bad != nil && v.bad[0] {
		return &exprFail{kind: k}, k, true
	}
	c := &exprConst{v: exprVec{kind: k, konst: true}}
	switch k {
	case exInt:
		c.v.i = []int64{v.i[0]}
	case exFloat:
		c.v.f = []float64{v.f[0]}
	case exBool:
		c.v.b = []bool{v.b[0]}
	case exString:
		c.v.s = []string{v.s[0]}
	}
	return c, k, true
}

func exprConstOf(v any) (exprNode, exprKind, bool) {
	c := &exprConst{v: exprVec{konst: true}}
	switch v := v.(type) {
	case int:
		c.v.kind, c.v.i = exInt, []int64{int64(v)}
	case float64:
		c.v.kind, c.v.f = exFloat, []float64{v}
	case bool:
		c.v.kind, c.v.b = exBool, []bool{v}
	case string:
		c.v.kind, c.v.s = exString, []string{v}
	default:
		return nil, 0, false
	}
	return c, c.v.kind, true
}

// exprToFloatNode converts an int operand to float, as expr does for mixed
// arithmetic and comparisons.
func exprToFloatNode(nd exprNode, k exprKind) exprNode {
	if k == exFloat {
		return nd
	}
	c := &exprIntToFloat{a: nd}
	f, _, _ := exprFold(c, exFloat, nd)
	return f
}

func (p *exprPlanner) node(n ast.Node) (exprNode, exprKind, bool) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		c, ok := p.cols[n.Value]
		if !ok {
			return nil, 0, false
		}
		return &exprCol{c: c}, p.kinds[c], true
	case *ast.IntegerNode:
		return exprConstOf(n.Value)
	case *ast.FloatNode:
		return exprConstOf(n.Value)
	case *ast.StringNode:
		return exprConstOf(n.Value)
	case *ast.BoolNode:
		return exprConstOf(n.Value)
	case *ast.ConstantNode:
		return exprConstOf(n.Value)
	case *ast.UnaryNode:
		return p.unary(n)
	case *ast.BinaryNode:
		return p.binary(n)
	case *ast.BuiltinNode:
		return p.builtin(n)
	case *ast.ConditionalNode:
		c, ck, ok1 := p.plan(n.Cond)
		a, ak, ok2 := p.plan(n.Exp1)
		b, bk, ok3 := p.plan(n.Exp2)
		if !ok1 || !ok2 || !ok3 || ck != exBool || ak != bk {
			return nil, 0, false
		}
		return exprFold(&exprCond{c: c, a: a, b: b, kind: ak}, ak, c, a, b)
	}
	return nil, 0, false
}

func (p *exprPlanner) unary(n *ast.UnaryNode) (exprNode, exprKind, bool) {
	a, k, ok := p.plan(n.Node)
	if !ok {
		return nil, 0, false
	}
	switch n.Operator {
	case "!", "not":
		if k == exBool {
			return exprFold(&exprNot{a: a}, exBool, a)
		}
	case "-":
		if k == exInt || k == exFloat {
			return exprFold(&exprNeg{a: a, kind: k}, k, a)
		}
	case "+":
		if k == exInt || k == exFloat {
			return a, k, true
		}
	}
	return nil, 0, false
}

func (p *exprPlanner) binary(n *ast.BinaryNode) (exprNode, exprKind, bool) {
	a, ak, ok := p.plan(n.Left)
	if !ok {
		return nil, 0, false
	}
	if n.Operator == "in" {
		return p.in(a, ak, n.Right)
	}
	if n.Operator == "matches" {
		s, ok := n.Right.(*ast.StringNode)
		if !ok || ak != exString {
			return nil, 0, false
		}
		re, err := regexp.Compile(s.Value)
		if err != nil {
			return nil, 0, false
		}
		return exprFold(&exprMatch{a: a, re: re}, exBool, a)
	}
	b, bk, ok := p.plan(n.Right)
	if !ok {
		return nil, 0, false
	}
	numeric := (ak == exInt || ak == exFloat) && (bk == exInt || bk == exFloat)
	// promote converts mixed int and float operands to float.
	promote := func() exprKind {
		if ak == exInt && bk == exInt {
			return exInt
		}
		a, b = exprToFloatNode(a, ak), exprToFloatNode(b, bk)
		return exFloat
	}
	switch op := n.Operator; op {
	case "and", "&&", "or", "||":
		if ak == exBool && bk == exBool {
			and := op == "and" || op == "&&"
			return exprFold(&exprLogic{and: and, a: a, b: b}, exBool, a, b)
		}
	case "==", "!=", "<", "<=", ">", ">=":
		cmp := exprCmpOps[op]
		switch {
		case numeric:
			k := promote()
			return exprFold(&exprCmp{op: cmp, kind: k, a: a, b: b}, exBool, a, b)
		case ak == exString && bk == exString:
			if nd, ok := exprStringEq(cmp, a, b); ok {
				return nd, exBool, true
			}
			return exprFold(&exprCmp{op: cmp, kind: exString, a: a, b: b}, exBool, a, b)
		case ak == exBool && bk == exBool && (op == "==" || op == "!="):
			return exprFold(&exprCmp{op: cmp, kind: exBool, a: a, b: b}, exBool, a, b)
		}
	case "+", "-", "*":
		if numeric {
			k := promote()
			return exprFold(&exprArith{op: op[0], kind: k, a: a, b: b}, k, a, b)
		}
		if op == "+" && ak == exString && bk == exString {
			return exprFold(&exprConcat{a: a, b: b}, exString, a, b)
		}
	case "/":
		if numeric {
			a, b = exprToFloatNode(a, ak), exprToFloatNode(b, bk)
			return exprFold(&exprArith{op: '/', kind: exFloat, a: a, b: b}, exFloat, a, b)
		}
	case "%":
		if ak == exInt && bk == exInt {
			return exprFold(&exprMod{a: a, b: b}, exInt, a, b)
		}
	case "**", "^":
		if numeric {
			a, b = exprToFloatNode(a, ak), exprToFloatNode(b, bk)
			return exprFold(&exprPow{a: a, b: b}, exFloat, a, b)
		}
	case "contains", "startsWith", "endsWith":
		if ak == exString && bk == exString {
			return exprFold(&exprStrPred{op: op, a: a, b: b}, exBool, a, b)
		}
	}
	return nil, 0, false
}

// in plans `a in [constants]`, with expr's equality: numbers compare by
// value across int and float, other kinds only with their own kind.
func (p *exprPlanner) in(a exprNode, ak exprKind, right ast.Node) (exprNode, exprKind, bool) {
	var consts []any
	switch r := right.(type) {
	case *ast.ConstantNode:
		switch v := r.Value.(type) {
		case []any:
			consts = v
		case map[int]struct{}:
			for k := range v {
				consts = append(consts, k)
			}
		case map[string]struct{}:
			for k := range v {
				consts = append(consts, k)
			}
		default:
			return nil, 0, false
		}
	case *ast.ArrayNode:
		for _, e := range r.Nodes {
			switch e := e.(type) {
			case *ast.IntegerNode:
				consts = append(consts, e.Value)
			case *ast.FloatNode:
				consts = append(consts, e.Value)
			case *ast.StringNode:
				consts = append(consts, e.Value)
			case *ast.BoolNode:
				consts = append(consts, e.Value)
			default:
				return nil, 0, false
			}
		}
	default:
		return nil, 0, false
	}
	nd := &exprIn{a: a, kind: ak}
	for _, c := range consts {
		switch c := c.(type) {
		case int:
			switch ak {
			case exInt:
				nd.ints.add(int64(c))
			case exFloat:
				nd.floats.add(float64(c))
			}
		case float64:
			if ak == exInt || ak == exFloat {
				nd.floats.add(c)
			}
		case string:
			if ak == exString {
				nd.strs.add(c)
			}
		case bool:
			if ak == exBool {
				nd.bools[exprB2i(c)] = true
			}
		default:
			return nil, 0, false
		}
	}
	return exprFold(nd, exBool, a)
}

func (p *exprPlanner) builtin(n *ast.BuiltinNode) (exprNode, exprKind, bool) {
	if n.Map != nil || n.Threshold != nil {
		return nil, 0, false
	}
	args := make([]exprNode, len(n.Arguments))
	kinds := make([]exprKind, len(n.Arguments))
	for i, a := range n.Arguments {
		var ok bool
		if args[i], kinds[i], ok = p.plan(a); !ok {
			return nil, 0, false
		}
	}
	if len(args) == 0 {
		return nil, 0, false
	}
	a, k := args[0], kinds[0]
	num := k == exInt || k == exFloat
	switch n.Name {
	case "abs":
		if len(args) == 1 && num {
			return exprFold(&exprAbs{a: a, kind: k}, k, a)
		}
	case "min", "max":
		for _, ki := range kinds {
			if ki != k {
				return nil, 0, false // mixed: the result's type depends on the values
			}
		}
		if num {
			return exprFold(&exprMinMax{max: n.Name == "max", args: args, kind: k}, k, args...)
		}
	case "ceil", "floor", "round":
		if len(args) == 1 && num {
			return exprFold(&exprRound{fn: n.Name, a: a, kind: k}, exFloat, a)
		}
	case "int":
		if len(args) == 1 && num {
			return exprFold(&exprFloatToInt{a: a, kind: k}, exInt, a)
		}
	case "float":
		if len(args) == 1 && num {
			return exprToFloatNode(a, k), exFloat, true
		}
	case "len":
		if len(args) == 1 && k == exString {
			return exprFold(&exprLen{a: a}, exInt, a)
		}
	}
	return nil, 0, false
}

// exprUnionBad is the failed rows of a node whose operands are vs: nil if
// none failed, else buf filled with their union.
func exprUnionBad(buf *[]bool, n int, vs ...*exprVec) []bool {
	var out []bool
	for _, v := range vs {
		if v.bad == nil {
			continue
		}
		if out == nil {
			out = exprGrow(buf, n)
			copy(out, v.bad)
			continue
		}
		for i := range out {
			out[i] = out[i] || v.bad[i]
		}
	}
	return out
}

func exprB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

type exprConst struct{ v exprVec }

func (c *exprConst) eval(*exprBatch) *exprVec { return &c.v }

// exprFail is a constant expression that fails, such as 10 % abs(0): every
// row fails, unless a short circuit skips it.
type exprFail struct {
	kind exprKind
	res  exprVec
	bad  []bool
}

func (c *exprFail) eval(x *exprBatch) *exprVec {
	c.res.size(c.kind, x.n)
	if len(c.bad) != x.n {
		exprRepeat(&c.bad, true, x.n)
	}
	c.res.bad = c.bad
	return &c.res
}

type exprCol struct{ c int }

func (c *exprCol) eval(x *exprBatch) *exprVec { return x.column(c.c) }

type exprIntToFloat struct {
	a   exprNode
	res exprVec
}

func (c *exprIntToFloat) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(exFloat, x.n)
	out, in := c.res.f, a.i[:x.n]
	for i, v := range in {
		out[i] = float64(v)
	}
	c.res.bad = a.bad
	return &c.res
}

type exprFloatToInt struct {
	a    exprNode
	kind exprKind
	res  exprVec
}

func (c *exprFloatToInt) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	if c.kind == exInt {
		return a
	}
	c.res.size(exInt, x.n)
	out, in := c.res.i, a.f[:x.n]
	for i, v := range in {
		out[i] = int64(int(v))
	}
	c.res.bad = a.bad
	return &c.res
}

type exprNot struct {
	a   exprNode
	res exprVec
}

func (c *exprNot) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(exBool, x.n)
	out, in := c.res.b, a.b[:x.n]
	for i, v := range in {
		out[i] = !v
	}
	c.res.bad = a.bad
	return &c.res
}

type exprNeg struct {
	a    exprNode
	kind exprKind
	res  exprVec
}

func (c *exprNeg) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(c.kind, x.n)
	if c.kind == exInt {
		out, in := c.res.i, a.i[:x.n]
		for i, v := range in {
			out[i] = -v
		}
	} else {
		out, in := c.res.f, a.f[:x.n]
		for i, v := range in {
			out[i] = -v
		}
	}
	c.res.bad = a.bad
	return &c.res
}

type exprAbs struct {
	a    exprNode
	kind exprKind
	res  exprVec
}

func (c *exprAbs) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(c.kind, x.n)
	if c.kind == exInt {
		out, in := c.res.i, a.i[:x.n]
		for i, v := range in {
			if v < 0 {
				v = -v
			}
			out[i] = v
		}
	} else {
		out, in := c.res.f, a.f[:x.n]
		for i, v := range in {
			if v < 0 {
				v = -v
			}
			out[i] = v
		}
	}
	c.res.bad = a.bad
	return &c.res
}

type exprRound struct {
	fn   string
	a    exprNode
	kind exprKind
	res  exprVec
}

func (c *exprRound) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(exFloat, x.n)
	out := c.res.f
	if c.kind == exInt {
		for i, v := range a.i[:x.n] {
			out[i] = float64(v)
		}
	} else {
		f := math.Round
		switch c.fn {
		case "ceil":
			f = math.Ceil
		case "floor":
			f = math.Floor
		}
		for i, v := range a.f[:x.n] {
			out[i] = f(v)
		}
	}
	c.res.bad = a.bad
	return &c.res
}

// exprLen is len of a string: expr counts runes.
type exprLen struct {
	a   exprNode
	res exprVec
}

func (c *exprLen) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(exInt, x.n)
	out := c.res.i
	for i, s := range a.s[:x.n] {
		out[i] = int64(utf8.RuneCountInString(s))
	}
	c.res.bad = a.bad
	return &c.res
}

type exprMinMax struct {
	max    bool
	args   []exprNode
	kind   exprKind
	res    exprVec
	badBuf []bool
	vals   []*exprVec
}

func (c *exprMinMax) eval(x *exprBatch) *exprVec {
	n := x.n
	c.vals = c.vals[:0]
	for _, a := range c.args {
		c.vals = append(c.vals, exprFull(a.eval(x), n))
	}
	c.res.size(c.kind, n)
	if c.kind == exInt {
		exprMinMaxOf(c.max, c.res.i, c.vals, func(v *exprVec) []int64 { return v.i })
	} else {
		exprMinMaxOf(c.max, c.res.f, c.vals, func(v *exprVec) []float64 { return v.f })
	}
	c.res.bad = exprUnionBad(&c.badBuf, n, c.vals...)
	return &c.res
}

// exprMinMaxOf follows expr's minMax: start with the first argument and
// take a later one when the current is Less (max) or More (min) than it.
func exprMinMaxOf[T int64 | float64](max bool, out []T, vals []*exprVec, get func(*exprVec) []T) {
	copy(out, get(vals[0])[:len(out)])
	for _, v := range vals[1:] {
		in := get(v)[:len(out)]
		if max {
			for i, e := range in {
				if out[i] < e {
					out[i] = e
				}
			}
		} else {
			for i, e := range in {
				if out[i] > e {
					out[i] = e
				}
			}
		}
	}
}

type exprCond struct {
	c, a, b exprNode
	kind    exprKind
	res     exprVec
	badBuf  []bool
}

func (c *exprCond) eval(x *exprBatch) *exprVec {
	n := x.n
	cv := exprFull(c.c.eval(x), n)
	av := exprFull(c.a.eval(x), n)
	bv := exprFull(c.b.eval(x), n)
	c.res.size(c.kind, n)
	switch c.kind {
	case exInt:
		exprPick(c.res.i, cv.b, av.i, bv.i)
	case exFloat:
		exprPick(c.res.f, cv.b, av.f, bv.f)
	case exBool:
		exprPick(c.res.b, cv.b, av.b, bv.b)
	case exString:
		exprPick(c.res.s, cv.b, av.s, bv.s)
	}
	c.res.bad = nil
	if cv.bad != nil || av.bad != nil || bv.bad != nil {
		bad := exprGrow(&c.badBuf, n)
		for i := range bad {
			switch {
			case cv.bad != nil && cv.bad[i]:
				bad[i] = true
			case cv.b[i]:
				bad[i] = av.bad != nil && av.bad[i]
			default:
				bad[i] = bv.bad != nil && bv.bad[i]
			}
		}
		c.res.bad = bad
	}
	return &c.res
}

func exprPick[T any](out []T, cond []bool, a, b []T) {
	cond, a, b = cond[:len(out)], a[:len(out)], b[:len(out)]
	for i, c := range cond {
		if c {
			out[i] = a[i]
		} else {
			out[i] = b[i]
		}
	}
}

type exprLogic struct {
	and    bool
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprLogic) eval(x *exprBatch) *exprVec {
	n := x.n
	av := exprFull(c.a.eval(x), n)
	bv := exprFull(c.b.eval(x), n)
	c.res.size(exBool, n)
	out, l, r := c.res.b, av.b[:n], bv.b[:n]
	if av.bad == nil && bv.bad == nil {
		exprBoolOp(c.and, out, l, r)
		return &c.res
	}
	// With failures, follow the VM's short circuit: the right side only
	// counts where the left side did not decide.
	bad := exprGrow(&c.badBuf, n)
	for i := range out {
		switch {
		case av.bad != nil && av.bad[i]:
			out[i], bad[i] = false, true
		case l[i] != c.and:
			out[i], bad[i] = l[i], false
		default:
			out[i], bad[i] = r[i], bv.bad != nil && bv.bad[i]
		}
	}
	c.res.bad = bad
	return &c.res
}

// exprBoolOp sets out to l && r (and) or l || r, eight bools a word: a
// bool is the byte 0 or 1.
func exprBoolOp(and bool, out, l, r []bool) {
	ow, lw, rw := exprWords(out), exprWords(l[:len(out)]), exprWords(r[:len(out)])
	n := 0
	if ow != nil && lw != nil && rw != nil {
		n = len(ow)
		if and {
			for i := range ow {
				ow[i] = lw[i] & rw[i]
			}
		} else {
			for i := range ow {
				ow[i] = lw[i] | rw[i]
			}
		}
	}
	for i := n * 8; i < len(out); i++ {
		if and {
			out[i] = l[i] && r[i]
		} else {
			out[i] = l[i] || r[i]
		}
	}
}

// exprWords returns the whole eight-bool words of b as uint64s, or nil
// when there are none or b is not aligned for them (tiny allocations need
// not be).
func exprWords(b []bool) []uint64 {
	p := unsafe.SliceData(b)
	if len(b) < 8 || uintptr(unsafe.Pointer(p))%8 != 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(p)), len(b)/8)
}

// Comparison operators.
const (
	exprEq byte = iota
	exprNe
	exprLt
	exprLe
	exprGt
	exprGe
)

var exprCmpOps = map[string]byte{"==": exprEq, "!=": exprNe, "<": exprLt, "<=": exprLe, ">": exprGt, ">=": exprGe}

// exprFlip is op with its operands swapped: a < b is b > a.
func exprFlip(op byte) byte {
	switch op {
	case exprLt:
		return exprGt
	case exprLe:
		return exprGe
	case exprGt:
		return exprLt
	case exprGe:
		return exprLe
	}
	return op
}

type exprCmp struct {
	op     byte
	kind   exprKind // of the operands
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprCmp) eval(x *exprBatch) *exprVec {
	av, bv := c.a.eval(x), c.b.eval(x)
	c.res.size(exBool, x.n)
	out := c.res.b
	switch c.kind {
	case exInt:
		exprCompare(c.op, av.i, bv.i, av.konst, bv.konst, out)
	case exFloat:
		exprCompare(c.op, av.f, bv.f, av.konst, bv.konst, out)
	case exString:
		exprCompare(c.op, av.s, bv.s, av.konst, bv.konst, out)
	case exBool:
		l, r := exprFull(av, x.n).b[:len(out)], exprFull(bv, x.n).b[:len(out)]
		ne := c.op == exprNe
		for i := range out {
			out[i] = (l[i] == r[i]) != ne
		}
	}
	c.res.bad = exprUnionBad(&c.badBuf, x.n, av, bv)
	return &c.res
}

// exprStringEq plans column == "literal" (or !=), the commonest string
// test, to read the Arrow column directly instead of loading it.
func exprStringEq(op byte, a, b exprNode) (exprNode, bool) {
	if op != exprEq && op != exprNe {
		return nil, false
	}
	col, ok1 := a.(*exprCol)
	lit, ok2 := b.(*exprConst)
	if !ok1 || !ok2 {
		col, ok1 = b.(*exprCol)
		lit, ok2 = a.(*exprConst)
	}
	if !ok1 || !ok2 {
		return nil, false
	}
	return &exprStrEqConst{c: col.c, s: lit.v.s[0], ne: op == exprNe}, true
}

type exprStrEqConst struct {
	c   int
	s   string
	ne  bool
	res exprVec
}

func (c *exprStrEqConst) eval(x *exprBatch) *exprVec {
	c.res.size(exBool, x.n)
	out := c.res.b
	a := x.rec.Column(c.c).(*array.String)
	offs := a.ValueOffsets()[:len(out)+1]
	data := a.ValueBytes()
	base, n := offs[0], int32(len(c.s))
	if n > 16 {
		for i := range out {
			lo, hi := offs[i]-base, offs[i+1]-base
			out[i] = (hi-lo == n && string(data[lo:hi]) == c.s) != c.ne
		}
		return &c.res
	}
	// Short literals: compare inline rather than call memequal per row.
	s := c.s
	for i := range out {
		lo, hi := offs[i]-base, offs[i+1]-base
		eq := hi-lo == n
		if eq {
			for k, ch := range data[lo:hi] {
				if ch != s[k] {
					eq = false
					break
				}
			}
		}
		out[i] = eq != c.ne
	}
	return &c.res
}

// exprCompare sets out[i] to a[i] op b[i]; a konst operand has one value.
func exprCompare[T int64 | float64 | string](op byte, a, b []T, ak, bk bool, out []bool) {
	if ak && !bk {
		a, b, ak, bk, op = b, a, bk, ak, exprFlip(op)
	}
	if bk {
		s := b[0]
		a = a[:len(out)]
		switch op {
		case exprEq:
			for i, v := range a {
				out[i] = v == s
			}
		case exprNe:
			for i, v := range a {
				out[i] = v != s
			}
		case exprLt:
			for i, v := range a {
				out[i] = v < s
			}
		case exprLe:
			for i, v := range a {
				out[i] = v <= s
			}
		case exprGt:
			for i, v := range a {
				out[i] = v > s
			}
		case exprGe:
			for i, v := range a {
				out[i] = v >= s
			}
		}
		return
	}
	a, b = a[:len(out)], b[:len(out)]
	switch op {
	case exprEq:
		for i, v := range a {
			out[i] = v == b[i]
		}
	case exprNe:
		for i, v := range a {
			out[i] = v != b[i]
		}
	case exprLt:
		for i, v := range a {
			out[i] = v < b[i]
		}
	case exprLe:
		for i, v := range a {
			out[i] = v <= b[i]
		}
	case exprGt:
		for i, v := range a {
			out[i] = v > b[i]
		}
	case exprGe:
		for i, v := range a {
			out[i] = v >= b[i]
		}
	}
}

type exprArith struct {
	op     byte // + - * /; / only on floats
	kind   exprKind
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprArith) eval(x *exprBatch) *exprVec {
	av, bv := c.a.eval(x), c.b.eval(x)
	c.res.size(c.kind, x.n)
	if c.kind == exInt {
		exprArithOf(c.op, av.i, bv.i, av.konst, bv.konst, c.res.i)
	} else {
		exprArithOf(c.op, av.f, bv.f, av.konst, bv.konst, c.res.f)
	}
	c.res.bad = exprUnionBad(&c.badBuf, x.n, av, bv)
	return &c.res
}

// exprArithOf sets out[i] to a[i] op b[i] with Go's (and expr's) int and
// float semantics; a konst operand has one value.
func exprArithOf[T int64 | float64](op byte, a, b []T, ak, bk bool, out []T) {
	switch {
	case ak:
		s := a[0]
		b = b[:len(out)]
		switch op {
		case '+':
			for i, v := range b {
				out[i] = s + v
			}
		case '-':
			for i, v := range b {
				out[i] = s - v
			}
		case '*':
			for i, v := range b {
				out[i] = s * v
			}
		case '/':
			for i, v := range b {
				out[i] = s / v
			}
		}
	case bk:
		s := b[0]
		a = a[:len(out)]
		switch op {
		case '+':
			for i, v := range a {
				out[i] = v + s
			}
		case '-':
			for i, v := range a {
				out[i] = v - s
			}
		case '*':
			for i, v := range a {
				out[i] = v * s
			}
		case '/':
			for i, v := range a {
				out[i] = v / s
			}
		}
	default:
		a, b = a[:len(out)], b[:len(out)]
		switch op {
		case '+':
			for i, v := range a {
				out[i] = v + b[i]
			}
		case '-':
			for i, v := range a {
				out[i] = v - b[i]
			}
		case '*':
			for i, v := range a {
				out[i] = v * b[i]
			}
		case '/':
			for i, v := range a {
				out[i] = v / b[i]
			}
		}
	}
}

// exprMod is int % int; a zero divisor fails the row, as the VM's panic
// does.
type exprMod struct {
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprMod) eval(x *exprBatch) *exprVec {
	n := x.n
	av, bv := exprFull(c.a.eval(x), n), c.b.eval(x)
	c.res.size(exInt, n)
	out, l := c.res.i, av.i[:n]
	bad := exprUnionBad(&c.badBuf, n, av, bv)
	if bv.konst && bv.i[0] != 0 {
		d := bv.i[0]
		for i, v := range l {
			out[i] = v % d
		}
		c.res.bad = bad
		return &c.res
	}
	r := exprFull(bv, n).i[:n]
	for i, v := range l {
		d := r[i]
		if d == 0 {
			if bad == nil {
				bad = exprGrow(&c.badBuf, n)
				clear(bad)
			}
			out[i], bad[i] = 0, true
			continue
		}
		out[i] = v % d
	}
	c.res.bad = bad
	return &c.res
}

type exprPow struct {
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprPow) eval(x *exprBatch) *exprVec {
	n := x.n
	av, bv := exprFull(c.a.eval(x), n), exprFull(c.b.eval(x), n)
	c.res.size(exFloat, n)
	out, l, r := c.res.f, av.f[:n], bv.f[:n]
	for i, v := range l {
		out[i] = math.Pow(v, r[i])
	}
	c.res.bad = exprUnionBad(&c.badBuf, n, av, bv)
	return &c.res
}

type exprConcat struct {
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprConcat) eval(x *exprBatch) *exprVec {
	n := x.n
	av, bv := exprFull(c.a.eval(x), n), exprFull(c.b.eval(x), n)
	c.res.size(exString, n)
	out, l, r := c.res.s, av.s[:n], bv.s[:n]
	for i, v := range l {
		out[i] = v + r[i]
	}
	c.res.bad = exprUnionBad(&c.badBuf, n, av, bv)
	return &c.res
}

type exprStrPred struct {
	op     string // contains, startsWith, endsWith
	a, b   exprNode
	res    exprVec
	badBuf []bool
}

func (c *exprStrPred) eval(x *exprBatch) *exprVec {
	n := x.n
	av, bv := exprFull(c.a.eval(x), n), exprFull(c.b.eval(x), n)
	c.res.size(exBool, n)
	f := strings.Contains
	switch c.op {
	case "startsWith":
		f = strings.HasPrefix
	case "endsWith":
		f = strings.HasSuffix
	}
	out, l, r := c.res.b, av.s[:n], bv.s[:n]
	for i, v := range l {
		out[i] = f(v, r[i])
	}
	c.res.bad = exprUnionBad(&c.badBuf, n, av, bv)
	return &c.res
}

type exprMatch struct {
	a   exprNode
	re  *regexp.Regexp
	res exprVec
}

func (c *exprMatch) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(exBool, x.n)
	out := c.res.b
	for i, v := range a.s[:x.n] {
		out[i] = c.re.MatchString(v)
	}
	c.res.bad = a.bad
	return &c.res
}

// exprSet is a set of constants: a list while small, a map when larger.
type exprSet[T comparable] struct {
	list []T
	m    map[T]struct{}
}

func (s *exprSet[T]) add(v T) {
	if s.m != nil {
		s.m[v] = struct{}{}
		return
	}
	s.list = append(s.list, v)
	if len(s.list) > 8 {
		s.m = make(map[T]struct{}, len(s.list))
		for _, x := range s.list {
			s.m[x] = struct{}{}
		}
	}
}

func (s *exprSet[T]) has(v T) bool {
	if s.m != nil {
		_, ok := s.m[v]
		return ok
	}
	for _, x := range s.list {
		if x == v {
			return true
		}
	}
	return false
}

func (s *exprSet[T]) empty() bool { return len(s.list) == 0 }

type exprIn struct {
	a      exprNode
	kind   exprKind // of the needle
	ints   exprSet[int64]
	floats exprSet[float64] // for an int needle, only the float constants
	strs   exprSet[string]
	bools  [2]bool
	res    exprVec
}

func (c *exprIn) eval(x *exprBatch) *exprVec {
	a := c.a.eval(x)
	c.res.size(exBool, x.n)
	out := c.res.b
	switch c.kind {
	case exInt:
		floats := !c.floats.empty()
		for i, v := range a.i[:x.n] {
			out[i] = c.ints.has(v) || floats && c.floats.has(float64(v))
		}
	case exFloat:
		for i, v := range a.f[:x.n] {
			out[i] = c.floats.has(v)
		}
	case exString:
		for i, v := range a.s[:x.n] {
			out[i] = c.strs.has(v)
		}
	case exBool:
		for i, v := range a.b[:x.n] {
			out[i] = c.bools[exprB2i(v)]
		}
	}
	c.res.bad = a.bad
	return &c.res
}
