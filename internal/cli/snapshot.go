package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/bench"
)

// snapshotJSON is one snapshot in `canopy snapshot ls --json` and
// `snapshot create --json`.
type snapshotJSON struct {
	Name    string `json:"name"`
	Path    string `json:"path"` // where it reads: DIR/.snapshot/NAME
	Ino     uint64 `json:"ino"`
	Created string `json:"created"`
	Nodes   uint64 `json:"nodes"`
	Bytes   uint64 `json:"bytes"`
}

// snapshotDiffJSON is `canopy snapshot diff --json`.
type snapshotDiffJSON struct {
	From      string                  `json:"from"`
	To        string                  `json:"to"` // "" for the directory as it is now
	Changes   []client.SnapshotChange `json:"changes"`
	Truncated bool                    `json:"truncated"`
}

// snapErr turns the snapshot calls' errors into one line that says what
// is wrong: op and dir are the command and directory, name the snapshot.
func snapErr(op, dir, name string, err error) error {
	var errno syscall.Errno
	if err == nil || !errors.As(err, &errno) {
		return err
	}
	unknownSnap := strings.Contains(err.Error(), "no such snapshot")
	switch {
	case errno == syscall.ENOENT && unknownSnap:
		return fmt.Errorf("snapshot %s %s: no snapshot %q", op, dir, name)
	case errno == syscall.ENOENT:
		return fmt.Errorf("snapshot %s %s: no such directory", op, dir)
	case errno == syscall.ENOTDIR:
		return fmt.Errorf("snapshot %s %s: not a directory", op, dir)
	case errno == syscall.EEXIST && strings.Contains(err.Error(), "snapshot exists"):
		return fmt.Errorf("snapshot %s %s: snapshot %q exists", op, dir, name)
	case errno == syscall.EEXIST:
		return fmt.Errorf("snapshot %s %s: the directory has an entry named %s", op, dir, client.SnapshotDir)
	case errno == syscall.EPERM:
		return fmt.Errorf("snapshot %s %s: only the directory's owner or root may", op, dir)
	case errno == syscall.EROFS:
		return fmt.Errorf("snapshot %s %s: inside a snapshot (read only)", op, dir)
	case errno == syscall.EINVAL || errno == syscall.ENAMETOOLONG:
		return fmt.Errorf("snapshot %s %s: bad snapshot name %q", op, dir, name)
	case errno == syscall.EDQUOT:
		return fmt.Errorf("snapshot %s %s: over the quota of the partition's root", op, dir)
	}
	return fmt.Errorf("snapshot %s %s: %w", op, dir, errno)
}

func newSnapshotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take, list, compare and remove read-only copies of a directory",
		Long: "A snapshot is a read-only copy of a directory's subtree that reads at PATH/.snapshot/NAME through\n" +
			"every interface (the CLI, the SDK, the mount); every change there fails with EROFS. Taking one copies\n" +
			"metadata only: files share their data with the directory until either side changes. The directory's\n" +
			"owner or root may take and remove them. `canopy clone PATH/.snapshot/NAME/x DST` brings back a writable copy.",
		Example: "  canopy snapshot create /projects/a before-upgrade\n  canopy snapshot ls /projects/a\n" +
			"  canopy snapshot diff /projects/a before-upgrade\n  canopy snapshot rm /projects/a before-upgrade",
	}
	var asJSON bool
	toJSON := func(dir string, s client.Snapshot) snapshotJSON {
		return snapshotJSON{Name: s.Name, Path: strings.TrimSuffix(dir, "/") + "/" + client.SnapshotDir + "/" + s.Name,
			Ino: uint64(s.Ino), Created: s.Created.Format(time.RFC3339Nano), Nodes: s.Nodes, Bytes: s.Bytes}
	}
	create := &cobra.Command{
		Use: "create PATH NAME", Short: "Take snapshot NAME of directory PATH", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			dir, name := canon(args[0]), args[1]
			return g.run(func(ctx context.Context, c *client.Client) error {
				start := time.Now()
				s, err := c.SnapshotCreate(ctx, dir, name)
				if err != nil {
					return snapErr("create", dir, name, err)
				}
				if asJSON {
					return json.NewEncoder(g.out).Encode(toJSON(dir, s))
				}
				fmt.Fprintf(g.out, "%s: %d nodes, %s shared, in %s\n", toJSON(dir, s).Path, s.Nodes,
					bench.FormatSize(int64(s.Bytes)), time.Since(start).Round(time.Millisecond))
				return nil
			})
		},
	}
	ls := &cobra.Command{
		Use: "ls PATH", Aliases: []string{"list"}, Short: "List the snapshots of directory PATH", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := canon(args[0])
			return g.run(func(ctx context.Context, c *client.Client) error {
				list, err := c.SnapshotList(ctx, dir)
				if err != nil {
					return snapErr("ls", dir, "", err)
				}
				if asJSON {
					out := []snapshotJSON{}
					for _, s := range list {
						out = append(out, toJSON(dir, s))
					}
					return json.NewEncoder(g.out).Encode(out)
				}
				w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tCREATED\tNODES\tSIZE")
				for _, s := range list {
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", s.Name, s.Created.Format("2006-01-02 15:04:05"), s.Nodes, bench.FormatSize(int64(s.Bytes)))
				}
				return w.Flush()
			})
		},
	}
	rm := &cobra.Command{
		Use: "rm PATH NAME", Aliases: []string{"remove"}, Short: "Remove snapshot NAME of directory PATH", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			dir, name := canon(args[0]), args[1]
			return g.run(func(ctx context.Context, c *client.Client) error {
				return snapErr("rm", dir, name, c.SnapshotRemove(ctx, dir, name))
			})
		},
	}
	diff := &cobra.Command{
		Use:   "diff PATH NAME [NAME2]",
		Short: "What changed in PATH since snapshot NAME (or between NAME and NAME2): +, - and M lines",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(_ *cobra.Command, args []string) error {
			dir, from, to := canon(args[0]), args[1], ""
			if len(args) == 3 {
				to = args[2]
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				changes, truncated, err := c.SnapshotDiff(ctx, dir, from, to)
				if err != nil {
					name := from
					if to != "" && strings.Contains(err.Error(), "\""+to+"\"") {
						name = to
					}
					return snapErr("diff", dir, name, err)
				}
				if asJSON {
					if changes == nil {
						changes = []client.SnapshotChange{}
					}
					return json.NewEncoder(g.out).Encode(snapshotDiffJSON{From: from, To: to, Changes: changes, Truncated: truncated})
				}
				for _, ch := range changes {
					fmt.Fprintf(g.out, "%s\t%s\n", ch.Op, ch.Path)
				}
				if truncated {
					fmt.Fprintln(g.out, "... (more changes than one reply holds)")
				}
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{create, ls, diff} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(create, ls, rm, diff)
	return cmd
}

func newCloneCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "clone SRC DST",
		Short: "Make DST a writable copy of the file or tree SRC, sharing its data (copy on write)",
		Long: "A clone copies metadata only: the copy's files share SRC's data until either side writes. SRC and DST\n" +
			"must be in one partition (a clone across partitions fails with EXDEV: copy the bytes with cp instead).\n" +
			"The copy counts against DST's quotas. Without root the caller must be able to read all of SRC and owns\n" +
			"the copy; root's copy keeps the owners. SRC may be in a snapshot (PATH/.snapshot/NAME/...).",
		Example: "  canopy clone /projects/a /projects/a-copy\n  canopy clone /projects/a/.snapshot/monday/report.txt /projects/a/report.txt",
		Args:    cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			src, dst := canon(args[0]), canon(args[1])
			return g.run(func(ctx context.Context, c *client.Client) error {
				fi, err := c.Clone(ctx, src, dst)
				if err != nil {
					return cloneErr(src, dst, err)
				}
				if asJSON {
					return json.NewEncoder(g.out).Encode(map[string]any{"src": src, "dst": dst, "ino": uint64(fi.Ino())})
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// cloneErr is a clone's error in one line.
func cloneErr(src, dst string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	why := map[syscall.Errno]string{
		syscall.ENOENT: "no such file or directory",
		syscall.EEXIST: dst + " exists",
		syscall.EXDEV:  "across partitions (copy the bytes with cp instead)",
		syscall.EDQUOT: "over a quota of the destination",
		syscall.EACCES: "permission denied (the caller must be able to read all of the source)",
		syscall.EROFS:  "the destination is in a snapshot (read only)",
	}[errno]
	if why == "" {
		why = errno.Error()
	}
	return fmt.Errorf("clone %s %s: %s", src, dst, why)
}
