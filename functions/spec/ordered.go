package spec

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// OrderedMap is a string-to-string mapping that keeps the order it was
// written in: the order of a schema's columns, of select's outputs and of
// aggregates matters.
type OrderedMap struct {
	Keys   []string
	Values []string
}

// Pair is one entry of an OrderedMap.
type Pair struct{ Key, Value string }

// NewOrderedMap builds a map from pairs in order.
func NewOrderedMap(pairs ...Pair) *OrderedMap {
	m := &OrderedMap{}
	for _, p := range pairs {
		m.Set(p.Key, p.Value)
	}
	return m
}

// Len returns the number of entries.
func (m *OrderedMap) Len() int {
	if m == nil {
		return 0
	}
	return len(m.Keys)
}

// Get returns the value of key.
func (m *OrderedMap) Get(key string) (string, bool) {
	if m == nil {
		return "", false
	}
	for i, k := range m.Keys {
		if k == key {
			return m.Values[i], true
		}
	}
	return "", false
}

// Set adds or replaces key, keeping its first position.
func (m *OrderedMap) Set(key, value string) {
	for i, k := range m.Keys {
		if k == key {
			m.Values[i] = value
			return
		}
	}
	m.Keys = append(m.Keys, key)
	m.Values = append(m.Values, value)
}

// UnmarshalYAML reads a mapping of scalars in document order; a repeated
// key is an error.
func (m *OrderedMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping of name: value", n.Line)
	}
	*m = OrderedMap{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: value of %q must be a scalar", v.Line, k.Value)
		}
		if _, dup := m.Get(k.Value); dup {
			return fmt.Errorf("line %d: %q is repeated", k.Line, k.Value)
		}
		m.Set(k.Value, v.Value)
	}
	return nil
}

// MarshalYAML writes the mapping in order.
func (m OrderedMap) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for i, k := range m.Keys {
		n.Content = append(n.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: k},
			&yaml.Node{Kind: yaml.ScalarNode, Value: m.Values[i]})
	}
	return n, nil
}

// MarshalJSON writes a JSON object with keys in order.
func (m OrderedMap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(m.Values[i])
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a JSON object keeping key order.
func (m *OrderedMap) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("want a JSON object")
	}
	*m = OrderedMap{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("value of %q: %w", kt, err)
		}
		m.Set(kt.(string), v)
	}
	_, err = dec.Token()
	return err
}

// Schema is an ordered list of column name → type name (see arrowfmt.Type).
type Schema = OrderedMap
