package registry

import (
	"fmt"
	"strconv"
	"strings"
)

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
