package stateexport

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"parquet": Parquet, "Arrow": Arrow} {
		if got, err := ParseFormat(in); got != want || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("csv"); err == nil || err.Error() != `format "csv": want parquet or arrow` {
		t.Errorf("csv: %v", err)
	}
}
