package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/fuse"
)

func newUmountCmd(_ *globals) *cobra.Command {
	var noLazy bool
	cmd := &cobra.Command{
		Use:   "umount MOUNTPOINT",
		Short: "Unmount a Canopy FUSE mount",
		Long: `Unmount a Canopy FUSE mount. If it is busy (a process has a file open or
its working directory in it), it is detached lazily: gone from the
namespace at once, ended when the last file on it is closed.`,
		Example: "  canopy umount /mnt/canopy",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			detached, err := fuse.Unmount(dir, !noLazy)
			if err != nil {
				if errors.Is(err, syscall.EBUSY) {
					return fmt.Errorf("%w (without --no-lazy it would be detached)", err)
				}
				return err
			}
			if detached {
				fmt.Fprintf(cmd.ErrOrStderr(), "canopy: %s was busy; detached, it ends when its last open file is closed\n", dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noLazy, "no-lazy", false, "fail if the mount is busy instead of detaching it")
	return cmd
}
