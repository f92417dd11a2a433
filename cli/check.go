package cli

import (
	"fmt"
	"io"
	"strings"
)

// CheckCommand reports whether args, a weir command line without the
// binary (a container's command and args, say), name a command weir has
// with flags and arguments it accepts, without running it. Flag values
// are parsed as the command would (a duration, a number).
func CheckCommand(args []string) error {
	root := newRoot(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return fmt.Errorf("check weir %s: %w", strings.Join(args, " "), err)
	}
	if cmd == root || !cmd.Runnable() || cmd.HasSubCommands() {
		return fmt.Errorf("check weir %s: %q is not a command that runs; see weir --help", strings.Join(args, " "), cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("check %s: %w", cmd.CommandPath(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("check %s: %w", cmd.CommandPath(), err)
	}
	return nil
}

// ConfigEnv are the WEIR_* environment variables that set configuration
// keys (WEIR_STORE for store, ...). The few weir reads directly
// (WEIR_CONFIG, WEIR_REDIS_PASSWORD) are not among them.
func ConfigEnv() []string {
	out := make([]string, 0, len(configKeys))
	for _, k := range configKeys {
		out = append(out, "WEIR_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_")))
	}
	return out
}
