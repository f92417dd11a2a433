package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// SavepointInfo is one savepoint of a job, as weir savepoints list shows
// it.
type SavepointInfo struct {
	Name string `json:"name"`
	// Key is the manifest's key: what weir deploy --from-savepoint takes.
	Key        string `json:"key"`
	Checkpoint int64  `json:"checkpoint"`
	Attempt    int    `json:"attempt"`
	Completed  string `json:"completed"`
	StateBytes int64  `json:"stateBytes"`
	Files      int    `json:"files"`
	// Error is why the manifest could not be read (the other fields are
	// empty then).
	Error string `json:"error,omitempty"`
}

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
			list, err := storeSavepoints(cmd.Context(), b, args[0])
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
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", s.Name, s.Checkpoint, s.Completed, humanBytes(s.StateBytes), s.Files, s.Key)
			}
			return tw.Flush()
		},
	})
	return s
}

// storeSavepoints reads the savepoint manifests of job in b, newest first.
func storeSavepoints(ctx context.Context, b blob.BucketReader, job string) ([]SavepointInfo, error) {
	objs, err := b.List(ctx, layout.SavepointsPrefix(job))
	if err != nil {
		return nil, fmt.Errorf("list the savepoints of %s in %s: %w", job, b.Describe(), err)
	}
	list := []SavepointInfo{}
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Key, layout.SavepointsPrefix(job))
		name, file, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || file != "manifest.json" {
			continue
		}
		info := SavepointInfo{Name: name, Key: o.Key}
		m, err := readManifestKey(ctx, b, o.Key)
		if err != nil {
			info.Error = err.Error()
			list = append(list, info)
			continue
		}
		info.Checkpoint, info.Attempt, info.Completed = m.Checkpoint, m.Attempt, formatTime(m.Completed)
		for _, v := range m.Vertices {
			for _, st := range v.Subtasks {
				for _, f := range st.State {
					info.StateBytes += f.Size
					info.Files++
				}
			}
		}
		list = append(list, info)
	}
	if len(list) == 0 {
		if _, err := b.Stat(ctx, layout.SpecKey(job)); err != nil {
			return nil, fmt.Errorf("no job %s in %s (%s: %v)", job, b.Describe(), layout.SpecKey(job), err)
		}
	}
	slices.SortFunc(list, func(x, y SavepointInfo) int { // newest first
		return cmp.Or(cmp.Compare(y.Checkpoint, x.Checkpoint), strings.Compare(y.Name, x.Name))
	})
	return list, nil
}
