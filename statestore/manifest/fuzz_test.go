package manifest_test

import (
	"errors"
	"os"
	"testing"

	"github.com/weirstream/weir/statestore/manifest"
)

// FuzzDecode: Decode never panics, refuses with ErrCorrupt or
// ErrUnsupportedVersion, and what it accepts is valid and round-trips.
func FuzzDecode(f *testing.F) {
	golden, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	m, err := manifest.Decode(golden)
	if err != nil {
		f.Fatal(err)
	}
	m.Savepoint = true
	m.Vertices = m.Vertices[2:]
	data, err := m.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"job":"j","checkpoint":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manifest.Decode(data)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned a manifest with error %v", err)
			}
			if !errors.Is(err, manifest.ErrCorrupt) && !errors.Is(err, manifest.ErrUnsupportedVersion) {
				t.Fatalf("Decode error %v wraps neither ErrCorrupt nor ErrUnsupportedVersion", err)
			}
			return
		}
		checkRoundTrip(t, m)
	})
}
