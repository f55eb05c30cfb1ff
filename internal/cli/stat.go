package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

// statJSON is the stable shape of `canopy stat --json`.
type statJSON struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	Ino    uint64 `json:"ino"`
	Type   string `json:"type"`
	Mode   string `json:"mode"` // permission bits in octal, e.g. "0755"
	Perm   string `json:"perm"` // as ls -l shows them, e.g. "drwxr-xr-x"
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	Nlink  uint32 `json:"nlink"`
	Size   uint64 `json:"size"`
	Atime  string `json:"atime"`
	Mtime  string `json:"mtime"`
	Ctime  string `json:"ctime"`
	Target string `json:"target,omitempty"` // symlinks
}

func newStatCmd(g *globals) *cobra.Command {
	var asJSON, deref bool
	cmd := &cobra.Command{
		Use:   "stat [--json] PATH...",
		Short: "Show a node's attributes (of a symlink itself unless -L)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, arg := range args {
					p := canon(arg)
					fi, err := c.Lstat(ctx, p)
					if deref {
						fi, err = c.Stat(ctx, p)
					}
					if err != nil {
						return err
					}
					s := toStatJSON(p, fi)
					if s.Type == "symlink" {
						if s.Target, err = c.Readlink(ctx, p); err != nil {
							return err
						}
					}
					if asJSON {
						data, _ := json.Marshal(s)
						fmt.Fprintln(g.out, string(data))
						continue
					}
					printStat(g, s)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per path")
	cmd.Flags().BoolVarP(&deref, "dereference", "L", false, "follow a symlink")
	return cmd
}

func toStatJSON(p string, fi *client.FileInfo) statJSON {
	a := fi.Attr()
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	return statJSON{
		Path: p, Name: fi.Name(), Ino: uint64(a.Ino), Type: typeName(a.Mode),
		Mode: fmt.Sprintf("%04o", a.Mode&0o7777), Perm: modeString(a.Mode),
		UID: a.UID, GID: a.GID, Nlink: a.Nlink, Size: a.Size,
		Atime: ts(a.Atime), Mtime: ts(a.Mtime), Ctime: ts(a.Ctime),
	}
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFREG:
		return "file"
	case syscall.S_IFLNK:
		return "symlink"
	case syscall.S_IFIFO:
		return "fifo"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFCHR:
		return "char-device"
	case syscall.S_IFBLK:
		return "block-device"
	}
	return "unknown"
}

func printStat(g *globals, s statJSON) {
	name := s.Path
	if s.Target != "" {
		name += " -> " + s.Target
	}
	fmt.Fprintf(g.out, "  File: %s\n  Size: %-12d Type: %s\n Inode: %-12d Links: %d\nAccess: (%s/%s)  Uid: %d  Gid: %d\nAccess: %s\nModify: %s\nChange: %s\n",
		name, s.Size, s.Type, s.Ino, s.Nlink, s.Mode, s.Perm, s.UID, s.GID, s.Atime, s.Mtime, s.Ctime)
}
