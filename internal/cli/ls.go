package cli

import (
	"context"
	"fmt"
	"path"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

func newLsCmd(g *globals) *cobra.Command {
	var long, recursive bool
	cmd := &cobra.Command{
		Use:     "ls [-l] [-R] [PATH...]",
		Short:   "List directories",
		Example: "  canopy ls -l /\n  canopy ls -R /data",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"/"}
			}
			l := lister{g: g, long: long, recursive: recursive}
			return g.run(func(ctx context.Context, c *client.Client) error {
				for i, p := range args {
					if err := l.list(ctx, c, canon(p), len(args) > 1 || recursive, i > 0); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long listing: mode, links, owner, group, size, time, name")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list subdirectories too")
	return cmd
}

type lister struct {
	g               *globals
	long, recursive bool
}

func (l *lister) list(ctx context.Context, c *client.Client, p string, header, blank bool) error {
	fi, err := c.Lstat(ctx, p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return l.print(ctx, c, p, fi)
	}
	if blank {
		fmt.Fprintln(l.g.out)
	}
	if header {
		fmt.Fprintf(l.g.out, "%s:\n", p)
	}
	// Entries print as their pages arrive; only the names of
	// subdirectories are kept, for -R.
	var subdirs []string
	for e, err := range c.Entries(ctx, p, l.long) {
		if err != nil {
			return err
		}
		if l.recursive && e.IsDir() {
			subdirs = append(subdirs, e.Name())
		}
		if !l.long {
			fmt.Fprintln(l.g.out, e.Name())
			continue
		}
		info, _ := e.Info()
		if err := l.print(ctx, c, path.Join(p, e.Name()), info.(*client.FileInfo)); err != nil {
			return err
		}
	}
	for _, name := range subdirs {
		if err := l.list(ctx, c, path.Join(p, name), true, true); err != nil {
			return err
		}
	}
	return nil
}

func (l *lister) print(ctx context.Context, c *client.Client, p string, fi *client.FileInfo) error {
	if !l.long {
		fmt.Fprintln(l.g.out, fi.Name())
		return nil
	}
	a := fi.Attr()
	name := fi.Name()
	if a.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		target, err := c.Readlink(ctx, p)
		if err != nil {
			return err
		}
		name += " -> " + target
	}
	fmt.Fprintf(l.g.out, "%s %3d %5d %5d %12d %s %s\n",
		modeString(a.Mode), a.Nlink, a.UID, a.GID, a.Size, a.Mtime.Local().Format(time.DateTime[:16]), name)
	return nil
}

// modeString renders st_mode as ls -l does: drwxr-sr-t.
func modeString(mode uint32) string {
	var b [10]byte
	b[0] = map[uint32]byte{
		syscall.S_IFDIR: 'd', syscall.S_IFLNK: 'l', syscall.S_IFIFO: 'p', syscall.S_IFSOCK: 's',
		syscall.S_IFCHR: 'c', syscall.S_IFBLK: 'b',
	}[mode&syscall.S_IFMT]
	if b[0] == 0 {
		b[0] = '-'
	}
	const rwx = "rwx"
	for i := range 9 {
		b[1+i] = '-'
		if mode&(1<<(8-i)) != 0 {
			b[1+i] = rwx[i%3]
		}
	}
	special := func(pos int, bit uint32, set, unset byte) {
		if mode&bit != 0 {
			if b[pos] == '-' {
				b[pos] = unset
			} else {
				b[pos] = set
			}
		}
	}
	special(3, syscall.S_ISUID, 's', 'S')
	special(6, syscall.S_ISGID, 's', 'S')
	special(9, syscall.S_ISVTX, 't', 'T')
	return string(b[:])
}
