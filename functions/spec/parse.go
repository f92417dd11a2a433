package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a spec: where (file, line, field path),
// what value, and what would be accepted.
type Problem struct {
	File  string
	Line  int
	Field string // e.g. sources[rides].eventTime.column
	Msg   string

	// nth picks the nth list item of that name (0-based) when a name is
	// repeated, so a duplicate's line is the duplicate's, not the first's.
	nth int
	// err is the error the message wraps (Errorf's %w), for errors.Is.
	err error
}

// Unwrap returns the error the problem's message wraps, if any.
func (p Problem) Unwrap() error { return p.err }

func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a spec. It is an error.
type Problems []Problem

func (ps Problems) Error() string {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Error()
	}
	if len(ps) == 1 {
		return "invalid job spec: " + msgs[0]
	}
	return fmt.Sprintf("invalid job spec (%d problems):\n  %s", len(ps), strings.Join(msgs, "\n  "))
}

// Add appends the problem of field, its message formatted as fmt.Sprintf
// does: how the checks of a connector's fields (package connector) report.
func (ps *Problems) Add(field, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Errorf returns the problem of field, its message formatted as
// fmt.Sprintf does, as an error: how a check outside this package (a
// schema, an expression, a connector) says which field is wrong, so that
// whoever collects it (ProblemsOf) need not add the field again.
func Errorf(field, format string, args ...any) error {
	e := fmt.Errorf(format, args...)
	return Problem{Field: field, Msg: e.Error(), err: errors.Unwrap(e)}
}

// ProblemsOf returns the problems inside err, which may join several
// (errors.Join) and wrap them: a Problem keeps its own field and the text
// that wraps it is dropped (the field says where it is); any other error is
// a problem of field with its text as the message.
func ProblemsOf(field string, err error) Problems {
	if err == nil {
		return nil
	}
	if ps := problemsIn(field, err); ps != nil {
		return ps
	}
	return Problems{{Field: field, Msg: err.Error()}}
}

// problemsIn collects the problems err holds, or nil if it holds none. A
// joined error's parts that hold none become problems of field.
func problemsIn(field string, err error) Problems {
	switch e := err.(type) {
	case Problem:
		return Problems{e}
	case Problems:
		return e
	case interface{ Unwrap() []error }:
		var ps Problems
		var plain []error
		for _, part := range e.Unwrap() {
			if sub := problemsIn(field, part); sub != nil {
				ps = append(ps, sub...)
			} else {
				plain = append(plain, part)
			}
		}
		if ps == nil {
			return nil
		}
		for _, part := range plain {
			ps = append(ps, Problem{Field: field, Msg: part.Error()})
		}
		return ps
	case interface{ Unwrap() error }:
		return problemsIn(field, e.Unwrap())
	}
	return nil
}

// AsProblems returns the problems inside err, if it holds any.
func AsProblems(err error) (Problems, bool) {
	var ps Problems
	ok := errors.As(err, &ps)
	return ps, ok
}

// Parse reads a YAML (or JSON) job spec strictly: unknown keys, wrong
// shapes and structural mistakes are reported all at once as Problems, each
// naming the file, line and field. file is used in messages only.
func Parse(data []byte, file string) (*Job, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Problems{{File: file, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, Problems{{File: file, Msg: "empty spec"}}
	}
	doc := root.Content[0]
	var probs Problems
	checkKeys(doc, reflect.TypeOf(Job{}), "", file, &probs)
	if len(probs) > 0 {
		return nil, probs
	}
	var job Job
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&job); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				probs = append(probs, Problem{File: file, Msg: strings.TrimPrefix(e, "yaml: ")})
			}
			return nil, probs
		}
		return nil, Problems{{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	probs = append(probs, job.normalizeConfigs()...)
	if err := job.Validate(); err != nil || len(probs) > 0 {
		ps, _ := AsProblems(err)
		ps = append(probs, ps...)
		for i := range ps {
			ps[i].File = file
			if ps[i].Line == 0 {
				ps[i].Line = lineOf(doc, ps[i].Field, ps[i].nth)
			}
		}
		return &job, ps
	}
	return &job, nil
}

// NormalizeConfigs passes each operator's config through JSON, the form in
// which the coordinator stores the spec and workers read it, so a function
// sees the same values (numbers as float64) at deploy time and at run time.
// Parse does it; a spec built in Go calls it before Validate. A config that
// JSON cannot carry is reported as Problems.
func (j *Job) NormalizeConfigs() error {
	if ps := j.normalizeConfigs(); len(ps) > 0 {
		return ps
	}
	return nil
}

func (j *Job) normalizeConfigs() Problems {
	var ps Problems
	for i := range j.Operators {
		o := &j.Operators[i]
		if o.Config == nil {
			continue
		}
		b, err := json.Marshal(o.Config)
		if err == nil {
			var m map[string]any
			if err = json.Unmarshal(b, &m); err == nil {
				o.Config = m
				continue
			}
		}
		ps = append(ps, Problem{Field: fmt.Sprintf("operators[%s].config", o.Name),
			Msg: "must be plain data with string keys (it is stored as JSON): " + err.Error()})
	}
	return ps
}

// checkKeys walks a YAML node against the Go type it will decode into and
// reports keys that type does not have, with the accepted ones and a
// suggestion. Free-form maps (Config, Fields, Schema) are not checked.
func checkKeys(n *yaml.Node, t reflect.Type, path, file string, probs *Problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // left at its zero value
	}
	if msg := checkType(n, t); msg != "" {
		*probs = append(*probs, Problem{File: file, Line: n.Line, Field: path, Msg: msg})
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeOf(OrderedMap{}) {
			return
		}
		fields := map[string]reflect.StructField{}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f
			names = append(names, name)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			sub := joinPath(path, k.Value)
			if !ok {
				msg := fmt.Sprintf("unknown field %q", k.Value)
				if s := suggest(k.Value, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				sorted := append([]string(nil), names...)
				sort.Strings(sorted)
				msg += "; accepted: " + strings.Join(sorted, ", ")
				*probs = append(*probs, Problem{File: file, Line: k.Line, Field: joinPath(path, k.Value), Msg: msg})
				continue
			}
			checkKeys(v, f.Type, sub, file, probs)
		}
	case reflect.Slice:
		for i, item := range n.Content {
			checkKeys(item, t.Elem(), fmt.Sprintf("%s[%s]", path, itemName(item, i)), file, probs)
		}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Struct && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				checkKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), file, probs)
			}
		}
	}
}

var (
	durationType    = reflect.TypeOf(Duration(0))
	sizeType        = reflect.TypeOf(Size(0))
	orderedMapType  = reflect.TypeOf(OrderedMap{})
	streamNamesType = reflect.TypeOf(StreamNames(nil))
)

// checkType reports, as a problem's message, a value of the wrong shape or
// type for t: what the value is and what is accepted. The decoder would
// refuse most of them too, but without the field, and it truncates 1.5
// into an integer field. "" means the value fits.
func checkType(n *yaml.Node, t reflect.Type) string {
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			return "want a duration such as 5s, got " + describeNode(n)
		}
		if _, err := ParseDuration(n.Value); err != nil {
			return fmt.Sprintf("%q is not a duration: want e.g. 500ms, 5s, 1m30s, 2h or 7d", n.Value)
		}
		return ""
	case t == sizeType:
		if n.Kind != yaml.ScalarNode {
			return "want a size such as 64MiB, got " + describeNode(n)
		}
		if _, err := ParseSize(n.Value); err != nil {
			return fmt.Sprintf("%q is not a size: want a whole number of bytes, or one with KiB, MiB or GiB, as in 512KiB or 64MiB", n.Value)
		}
		return ""
	case t == orderedMapType:
		if n.Kind != yaml.MappingNode {
			return "want a mapping of name: value, got " + describeNode(n)
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Sprintf("the value of %q is %s: want a single value, as in {%s: count()}", k.Value, describeNode(v), k.Value)
			}
			if seen[k.Value] {
				return fmt.Sprintf("%q is repeated", k.Value)
			}
			seen[k.Value] = true
		}
		return ""
	case t == streamNamesType:
		if n.Kind == yaml.ScalarNode {
			return ""
		}
		if n.Kind != yaml.SequenceNode {
			return "want a stream name, a pattern such as rides-* or a list such as [rides-0, rides-1], got " + describeNode(n)
		}
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Sprintf("the list holds %s: want stream names, as in [rides-0, rides-1]", describeNode(item))
			}
		}
		return ""
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			return "want a mapping, got " + describeNode(n)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if n.Kind == yaml.ScalarNode {
				return fmt.Sprintf("%q is not a list: write [%s]", n.Value, n.Value)
			}
			return "want a list, got " + describeNode(n)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode {
			return "want an integer, got " + describeNode(n)
		}
		if n.Tag != "!!int" || n.Decode(reflect.New(t).Interface()) != nil {
			return fmt.Sprintf("%q is not an integer", n.Value)
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			return "want a number, got " + describeNode(n)
		}
		if (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(reflect.New(t).Interface()) != nil {
			return fmt.Sprintf("%q is not a number", n.Value)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			return "want true or false, got " + describeNode(n)
		}
		if n.Tag != "!!bool" {
			return fmt.Sprintf("%q is not a boolean: want true or false", n.Value)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return "want a string, got " + describeNode(n)
		}
	}
	return ""
}

// describeNode says what a YAML value is, for messages: its text when it
// is a scalar, else a list or a mapping.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return fmt.Sprintf("%q", n.Value)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// itemName names a list item by its name field when it has one, so paths
// read sources[rides] rather than sources[0].
func itemName(n *yaml.Node, i int) string {
	if n.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "name" && n.Content[j+1].Value != "" {
				return n.Content[j+1].Value
			}
		}
	}
	return fmt.Sprint(i)
}

// lineOf finds the line of a field path in the document, or 0.
func lineOf(doc *yaml.Node, path string, nth int) int {
	if path == "" {
		return 0
	}
	n := doc
	line := 0
	for _, part := range splitPath(path) {
		key, idx, hasIdx := strings.Cut(part, "[")
		next := mapValue(n, key)
		if next == nil {
			return line
		}
		line = next.Line
		n = next
		if hasIdx {
			idx = strings.TrimSuffix(idx, "]")
			item := seqItem(n, idx, nth)
			if item == nil {
				return line
			}
			n, line = item, item.Line
		}
	}
	return line
}

func splitPath(path string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range path {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				parts = append(parts, path[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, path[start:])
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// seqItem returns the nth item of a sequence named idx (see itemName).
func seqItem(n *yaml.Node, idx string, nth int) *yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	var first *yaml.Node
	for i, item := range n.Content {
		if itemName(item, i) != idx {
			continue
		}
		if nth == 0 {
			return item
		}
		if first == nil {
			first = item
		}
		nth--
	}
	return first
}

// suggest returns the accepted name closest to got, if close enough.
func suggest(got string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(got), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// UnmarshalYAML reads "5s", "1m30s", "7d".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// UnmarshalYAML reads a string or a list of strings (checkType has
// checked the shape, with the field, when Parse decodes).
func (s *StreamNames) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*s = StreamNames{n.Value}
		return nil
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		*s = nil
		if len(list) > 0 {
			*s = list
		}
		return nil
	}
	return fmt.Errorf("line %d: want a stream name, a pattern or a list of names", n.Line)
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// WithLines fills in the file and line of each problem from the spec text
// it was found in.
func WithLines(ps Problems, data []byte, file string) Problems {
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	var doc *yaml.Node
	if len(root.Content) > 0 {
		doc = root.Content[0]
	}
	out := make(Problems, len(ps))
	for i, p := range ps {
		if p.File == "" {
			p.File = file
		}
		if p.Line == 0 && doc != nil {
			p.Line = lineOf(doc, p.Field, p.nth)
		}
		out[i] = p
	}
	return out
}
