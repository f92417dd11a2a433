package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/coordinator"
)

func (a *app) savepointsCmd() *cobra.Command {
	s := &cobra.Command{Use: "savepoints", Short: "The savepoints of a job in the store"}
	s.AddCommand(&cobra.Command{
		Use:   "list JOB",
		Short: "List a job's savepoints in the store (--store), newest first, with the key weir deploy --from-savepoint takes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer b.Close()
			list, err := coordinator.ListSavepoints(cmd.Context(), b, args[0])
			if err != nil {
				return err
			}
			if a.v.GetString("output") == "json" {
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCHECKPOINT\tCOMPLETED\tSTATE\tFILES\tKEY")
			for _, s := range list {
				if s.Error != "" {
					fmt.Fprintf(tw, "%s\t\t\t\t\t%s: %s\n", s.Name, s.Key, oneLine(s.Error))
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", s.Name, s.Checkpoint, formatTime(s.Completed), humanBytes(s.StateBytes), s.Files, s.Key)
			}
			return tw.Flush()
		},
	})
	return s
}
