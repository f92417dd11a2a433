package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/functions/plan"
	"github.com/weirstream/weir/functions/stateexport"
)

func (a *app) stateExportCmd() *cobra.Command {
	var operator, format, file string
	cmd := &cobra.Command{
		Use:   "export JOB N --operator NAME --file PATH",
		Short: "Write an operator's state in checkpoint N as a Parquet or Arrow file",
		Long: `Write the state one operator holds in checkpoint N of a job as a table in an
open format, for DuckDB, pandas, Polars or Spark: a Parquet file
(--format parquet, zstd-compressed, the Arrow schema stored in it) or an
Arrow IPC file (--format arrow). Without --format, the format follows the
file's extension (.parquet, .arrow), else it is parquet.

Where state dump prints the rows of each state file (a base and its
deltas, rows that say how to change the state), export rebuilds the state
as of the checkpoint: each subtask's files are restored as a worker
restores them after a failure, into the operator made from the job's spec
(jobs/<job>/spec.json), and the result is written once. Its rows:

  window    one per window of a key: key_group, the keyBy columns,
            window_start, window_end, emitted, pending and each
            aggregate's accumulator (<agg>__count, and __sum, __min or
            __max)
  join      one per kept row: key_group, side (left or right), then the
            left.<column> and right.<column> columns (the other side's
            are null)
  function  one per table entry or timer: key_group, table, the keyBy
            columns, namespace, value (the state codec's bytes: an int64
            is 8 bytes little-endian, a struct its JSON) and timestamp (a
            timer's time in ms; its table is __timers_event or
            __timers_processing)

The file is written to a temporary name beside PATH and renamed when it is
complete, so a failed export leaves no partial file; --file - writes to
standard output. Memory: the state of the largest subtask.

  weir state export rides 42 --operator per_zone --file zones.parquet
  duckdb -c "SELECT zone, sum(requests__count) FROM 'zones.parquet' GROUP BY zone"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseCheckpointID(args[1])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			f, err := exportFormat(format, file)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return a.exportState(cmd.Context(), args[0], n, operator, f, file)
		},
	}
	cmd.Flags().StringVar(&operator, "operator", "", "operator whose state to write (required)")
	cmd.Flags().StringVar(&file, "file", "", "file to write, - for standard output (required)")
	cmd.Flags().StringVar(&format, "format", "", "parquet or arrow (default: from the file's extension, else parquet)")
	_ = cmd.MarkFlagRequired("operator")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// exportFormat is --format, or the one file's extension names.
func exportFormat(format, file string) (stateexport.Format, error) {
	if format != "" {
		f, err := stateexport.ParseFormat(format)
		if err != nil {
			return "", fmt.Errorf("--format: %w", err)
		}
		return f, nil
	}
	if strings.EqualFold(filepath.Ext(file), ".arrow") {
		return stateexport.Arrow, nil
	}
	return stateexport.Parquet, nil
}

func (a *app) exportState(ctx context.Context, job string, n int64, operator string, f stateexport.Format, file string) error {
	b, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	m, _, err := readManifest(ctx, b, job, n)
	if err != nil {
		return err
	}
	js, err := loadJobSpec(ctx, b, job)
	if err != nil {
		return err
	}
	p, err := plan.Build(js)
	if err != nil {
		return fmt.Errorf("plan the job spec of %s: %w", job, err)
	}
	req := stateexport.Request{Bucket: b, Manifest: m, Plan: p, Operator: operator}
	var res stateexport.Result
	if file == "-" {
		res, err = stateexport.Export(ctx, req, a.stdout, f)
	} else {
		err = writeAtomically(file, func(w io.Writer) error {
			var err error
			res, err = stateexport.Export(ctx, req, w, f)
			return err
		})
	}
	if err != nil {
		return err
	}
	to := file
	if file == "-" {
		to = "standard output"
	}
	fmt.Fprintf(a.stderr, "weir: %d rows of operator %s in checkpoint %d (%d subtasks, %d state files, %s) written to %s as %s\n",
		res.Rows, operator, n, res.Subtasks, res.Files, humanBytes(res.Bytes), to, f)
	return nil
}

// writeAtomically writes path through a temporary file beside it, renamed
// over path once write and the close succeed.
func writeAtomically(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	// CreateTemp makes the file readable by its owner only; the export
	// is made as os.Create would make it (before the umask).
	err = tmp.Chmod(0o644)
	if err == nil {
		err = write(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return errors.Join(err, removeIfExists(tmp.Name()))
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
