package tracetest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestRun drives a counter through testdata/counter.txt: several commands
// in one block, an error, a command that prints nothing, a multi-line
// output, arguments as written, comments inside a block, and a fresh
// counter per script (fresh.txt).
func TestRun(t *testing.T) {
	scripts := 0
	Run(t, "testdata", func(t *testing.T) Func {
		scripts++
		n := 0
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			args := Words(td)
			switch td.Cmd {
			case "add":
				d, err := strconv.Atoi(args[0])
				if err != nil {
					return "", err
				}
				n += d
				return strconv.Itoa(n), nil
			case "reset":
				n = 0
				return "", nil
			case "fail":
				return "", errors.New(strings.Join(args, " "))
			case "count":
				var lines []string
				for i := 1; i <= n; i++ {
					lines = append(lines, strconv.Itoa(i))
				}
				return strings.Join(lines, "\n"), nil
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return "", nil
		}
	})
	if scripts != 2 {
		t.Errorf("ran %d scripts, want 2", scripts)
	}
}
