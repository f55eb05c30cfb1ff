package cli

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

// canon makes a Canopy path absolute: a relative path is taken from the
// root.
func canon(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "/" + p
	}
	return p
}

func newMkdirCmd(g *globals) *cobra.Command {
	var parents bool
	var mode string
	cmd := &cobra.Command{
		Use:     "mkdir [-p] PATH...",
		Short:   "Create directories",
		Example: "  canopy mkdir -p /data/2026/11",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			perm, err := parseMode(mode)
			if err != nil {
				return err
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, p := range args {
					if parents {
						err = c.MkdirAll(ctx, canon(p), perm)
					} else {
						_, err = c.Mkdir(ctx, canon(p), perm)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "create missing parents; no error if the directory exists")
	cmd.Flags().StringVarP(&mode, "mode", "m", "755", "permission bits, in octal")
	return cmd
}

func newTouchCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "touch PATH...",
		Short: "Create empty files, or set the times of existing ones to now",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, p := range args {
					_, err := c.Create(ctx, canon(p), 0o644)
					if errors.Is(err, syscall.EEXIST) {
						_, err = c.Touch(ctx, canon(p))
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

func newMvCmd(g *globals) *cobra.Command {
	var noClobber bool
	cmd := &cobra.Command{
		Use:   "mv SRC... DST",
		Short: "Move or rename; into DST if it is a directory",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			srcs, dst := args[:len(args)-1], canon(args[len(args)-1])
			var flags uint32
			if noClobber {
				flags = client.RenameNoReplace
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				fi, err := c.Stat(ctx, dst)
				intoDir := err == nil && fi.IsDir()
				if len(srcs) > 1 && !intoDir {
					return fmt.Errorf("mv: target %s is not a directory", dst)
				}
				for _, src := range srcs {
					to := dst
					if intoDir {
						to = path.Join(dst, path.Base(canon(src)))
					}
					if err := c.RenameFlags(ctx, canon(src), to, flags); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&noClobber, "no-clobber", "n", false, "fail instead of replacing an existing target")
	return cmd
}

func newRmCmd(g *globals) *cobra.Command {
	var recursive, force bool
	cmd := &cobra.Command{
		Use:   "rm [-r] [-f] PATH...",
		Short: "Remove files, or directory trees with -r",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, p := range args {
					var err error
					switch {
					case recursive:
						if _, err = c.Lstat(ctx, canon(p)); err == nil {
							err = c.RemoveAll(ctx, canon(p))
						}
					default:
						err = c.Unlink(ctx, canon(p))
					}
					if err != nil && !(force && errors.Is(err, syscall.ENOENT)) {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "ignore paths that do not exist")
	return cmd
}

func newLnCmd(g *globals) *cobra.Command {
	var symbolic bool
	cmd := &cobra.Command{
		Use:     "ln [-s] TARGET LINK",
		Short:   "Make a hard link, or a symlink with -s",
		Example: "  canopy ln -s /data/current /latest",
		Args:    cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				var err error
				if symbolic {
					_, err = c.Symlink(ctx, args[0], canon(args[1]))
				} else {
					_, err = c.Link(ctx, canon(args[0]), canon(args[1]))
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&symbolic, "symbolic", "s", false, "make a symlink")
	return cmd
}

func newReadlinkCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "readlink PATH",
		Short: "Print a symlink's target",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				target, err := c.Readlink(ctx, canon(args[0]))
				if err == nil {
					fmt.Fprintln(g.out, target)
				}
				return err
			})
		},
	}
}

func newChmodCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "chmod MODE PATH...",
		Short:   "Change permission bits (octal MODE)",
		Example: "  canopy chmod 1777 /tmp",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			mode, err := parseMode(args[0])
			if err != nil {
				return err
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, p := range args[1:] {
					if _, err := c.Chmod(ctx, canon(p), mode); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

func newChownCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "chown OWNER[:GROUP] PATH...",
		Short:   "Change owner and group (numeric ids or local names)",
		Example: "  canopy chown 1000:1000 /home/alice",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			uid, gid, err := parseOwner(args[0])
			if err != nil {
				return err
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, p := range args[1:] {
					if _, err := c.Chown(ctx, canon(p), uid, gid); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// parseMode reads octal permission bits.
func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("invalid mode %q: want octal, at most 7777", s)
	}
	return uint32(m), nil
}

// parseOwner reads OWNER[:GROUP]; an empty part is -1 (unchanged).
func parseOwner(s string) (uid, gid int64, err error) {
	owner, group, _ := strings.Cut(s, ":")
	if uid, err = lookupID(owner, func(n string) (string, error) {
		u, err := user.Lookup(n)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	}); err != nil {
		return 0, 0, fmt.Errorf("owner %q: %w", owner, err)
	}
	if gid, err = lookupID(group, func(n string) (string, error) {
		g, err := user.LookupGroup(n)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	}); err != nil {
		return 0, 0, fmt.Errorf("group %q: %w", group, err)
	}
	return uid, gid, nil
}

func lookupID(s string, byName func(string) (string, error)) (int64, error) {
	if s == "" {
		return -1, nil
	}
	if id, err := strconv.ParseUint(s, 10, 32); err == nil {
		return int64(id), nil
	}
	idStr, err := byName(s)
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(idStr, 10, 32)
	return int64(id), err
}
