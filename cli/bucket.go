package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/statestore/blob"
)

func (a *app) bucketCmd() *cobra.Command {
	b := &cobra.Command{Use: "bucket", Short: "Manage the store's bucket"}
	b.AddCommand(&cobra.Command{
		Use:   "create",
		Short: "Create the --store bucket if it does not exist (S3/MinIO); a no-op for a directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.openEnv(cmd.Context(), embedded)
			if err != nil {
				return err
			}
			defer e.close()
			if s3, ok := e.bucket.(*blob.S3); ok {
				if err := s3.EnsureBucket(cmd.Context()); err != nil {
					return err
				}
			}
			fmt.Fprintln(a.stdout, "bucket ready:", e.storeDesc)
			return nil
		},
	})
	return b
}
