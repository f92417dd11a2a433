package cli

import (
	"strings"
	"testing"
)

// TestUnknownSubcommand: every command that only holds subcommands fails
// on one it does not have, naming it and suggesting the nearest, instead
// of printing its help and exiting 0.
func TestUnknownSubcommand(t *testing.T) {
	for _, group := range []string{"jobs", "checkpoints", "state", "txn", "functions", "bucket", "workers"} {
		stdout, stderr, code := execWeir(group, "bogus")
		if code != 2 || !strings.Contains(stderr, `unknown command "bogus" for "weir `+group+`"`) {
			t.Errorf("weir %s bogus: exit %d, stderr %q, stdout %q; want exit 2 naming it", group, code, stderr, stdout)
		}
	}
	_, stderr, code := execWeir("jobs", "stauts", "x")
	if code != 2 || !strings.Contains(stderr, "Did you mean this?\n\tstatus") {
		t.Errorf("weir jobs stauts: exit %d, %q; want a suggestion of status", code, stderr)
	}
	// Alone, a group prints its help and succeeds.
	if stdout, _, code := execWeir("jobs"); code != 0 || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("weir jobs: exit %d, %q", code, stdout)
	}
}

// TestBadFlagIsAUsageError: an unknown flag or a flag value that does
// not parse exits 2, like an unknown command, naming the flag.
func TestBadFlagIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"jobs", "list", "--bogus"}, {"run", "--duration", "abc", "x.yaml"}, {"deploy", "--wait=maybe", "x.yaml"}} {
		_, stderr, code := execWeir(args...)
		if code != 2 || !strings.Contains(stderr, "--") {
			t.Errorf("weir %s: exit %d, stderr %q; want exit 2 naming the flag", strings.Join(args, " "), code, stderr)
		}
	}
}
