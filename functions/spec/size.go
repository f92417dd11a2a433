package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Size is a number of bytes, written 64MiB, 512KiB or 1048576 (ParseSize).
type Size int64

// UnmarshalYAML reads a size (checkType has checked it, with the field,
// when Parse decodes).
func (z *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*z = Size(v)
	return nil
}

// MarshalYAML writes the size as FormatSize does.
func (z Size) MarshalYAML() (any, error) { return FormatSize(int64(z)), nil }

// MarshalJSON writes the size as a string, as FormatSize does.
func (z Size) MarshalJSON() ([]byte, error) { return json.Marshal(FormatSize(int64(z))) }

// UnmarshalJSON reads "64MiB" or a number of bytes.
func (z *Size) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("size %s: want a string like \"64MiB\" or a number of bytes", b)
		}
		*z = Size(n)
		return nil
	}
	v, err := ParseSize(s)
	*z = Size(v)
	return err
}

var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseSize reads a size in bytes: a whole number, optionally followed by
// B, KiB, MiB or GiB (64MiB, 512KiB, 1048576).
func ParseSize(s string) (int64, error) {
	num, unit := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(n), u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || num[0] == '+' || n > (1<<62)/unit {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, or one with KiB, MiB or GiB, as in 512KiB or 64MiB", s)
	}
	return n * unit, nil
}

// FormatSize writes n bytes the way ParseSize reads them, in the largest
// unit that divides n (64MiB, 1536KiB, 100B).
func FormatSize(n int64) string {
	for _, u := range sizeUnits {
		if n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
