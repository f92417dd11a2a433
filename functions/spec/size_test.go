package spec

import (
	"strings"
	"testing"
)

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"64MiB", 64 << 20}, {"512KiB", 512 << 10}, {"1GiB", 1 << 30}, {"1048576", 1 << 20}, {"100B", 100}, {" 2 MiB ", 2 << 20}, {"0", 0}} {
		if got, err := ParseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "MiB", "64MB", "64mib", "1.5MiB", "-1", "+1", "x", "99999999999GiB"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		} else if !strings.Contains(err.Error(), "as in 512KiB or 64MiB") {
			t.Errorf("ParseSize(%q): %v", in, err)
		}
	}
	for n, want := range map[int64]string{64 << 20: "64MiB", 1536 << 10: "1536KiB", 100: "100B", 0: "0B", 4 << 30: "4GiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64MiB", "512KiB", "1", "1GiB", "-1B", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	})
}
