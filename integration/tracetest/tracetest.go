package tracetest

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Func carries out one command of a script: td.Cmd with td.CmdArgs, parsed
// by datadriven (so td.ScanArgs works; Words gives positional arguments).
// td.Input is empty: the lines of a block below its first are commands of
// their own, each given to Func in turn with td.Pos naming the block.
//
// Func returns what the command prints, one or more lines, or an error,
// printed as "error: <text>", so a script expects a rejection like any
// other output. A problem with the script itself (an unknown command, a
// missing argument) is better reported with t.Fatalf, which -rewrite
// cannot accept as output.
type Func func(t *testing.T, d *datadriven.TestData) (string, error)

// Nothing is printed for a command that prints nothing, so that no output
// is a blank line, which would end the block.
const Nothing = "(nothing)"

// Run runs the script at path, or every script below it if it is a
// directory, each in a subtest named after the file. newScript is called
// once per script, so each starts from a fresh state machine.
func Run(t *testing.T, path string, newScript func(t *testing.T) Func) {
	t.Helper()
	datadriven.Walk(t, path, func(t *testing.T, path string) {
		run := newScript(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var out []string
			do := func(cmd *datadriven.TestData) {
				res, err := run(t, cmd)
				switch {
				case err != nil:
					res = "error: " + err.Error()
				case res == "":
					res = Nothing
				}
				out = append(out, res)
			}
			first := *d
			first.Input = ""
			do(&first)
			for _, line := range strings.Split(d.Input, "\n") {
				if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
					continue // comments may sit between commands
				}
				cmd, args, err := datadriven.ParseLine(line)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				do(&datadriven.TestData{Pos: d.Pos, Cmd: cmd, CmdArgs: args, Rewrite: d.Rewrite})
			}
			return strings.Join(out, "\n")
		})
	})
}

// Words returns the arguments of td as written, in order ("key=value" is
// one word), for commands whose arguments are positional.
func Words(td *datadriven.TestData) []string {
	words := make([]string, len(td.CmdArgs))
	for i, a := range td.CmdArgs {
		words[i] = a.String()
	}
	return words
}
