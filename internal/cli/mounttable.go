package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/mount"
)

// mountTableJSON is the shape of `canopy mounttable ls --json`.
type mountTableJSON struct {
	Version uint64              `json:"version"`
	Mounts  []client.MountEntry `json:"mounts"`
}

func newMountTableCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mounttable",
		Short: "Show and edit the federation mount table",
		Long: `The mount table maps path prefixes of the namespace to a virtual partition
and a path inside it. It is kept by the root partition; --addr may name a
router or the root partition's metadata server.`,
		Example: `  canopy mounttable ls
  canopy mounttable add /user/alice 17
  canopy mounttable add /archive 12:/cold/archive --read-only
  canopy mounttable rm /user/alice`,
	}
	cmd.AddCommand(newMountTableLsCmd(g), newMountTableAddCmd(g), newMountTableRmCmd(g))
	return cmd
}

func newMountTableLsCmd(g *globals) *cobra.Command {
	return newTablesLsCmd(g, "List the mount entries", "PREFIX\tVPART\tTARGET\tMODE",
		func(t *client.Tables) any { return mountTableJSON{Version: t.Version, Mounts: t.Mounts} },
		func(t *client.Tables) []string {
			lines := make([]string, len(t.Mounts))
			for i, m := range t.Mounts {
				mode := "rw"
				if m.ReadOnly {
					mode = "ro"
				}
				lines[i] = fmt.Sprintf("%s\t%d\t%s\t%s", m.Prefix, m.VPart, m.Target, mode)
			}
			return lines
		})
}

// newTablesLsCmd returns an `ls [--json]` command printing one of the
// federation tables: the JSON object toJSON makes, or a table of header
// and the lines rows makes (tab-separated columns) followed by the tables'
// version.
func newTablesLsCmd(g *globals, short, header string, toJSON func(*client.Tables) any, rows func(*client.Tables) []string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				t, err := c.Tables(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					data, err := json.Marshal(toJSON(t))
					if err != nil {
						return err
					}
					fmt.Fprintln(g.out, string(data))
					return nil
				}
				tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, header)
				for _, line := range rows(t) {
					fmt.Fprintln(tw, line)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(g.out, "version %d\n", t.Version)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newMountTableAddCmd(g *globals) *cobra.Command {
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "add PREFIX VPART[:TARGET] [--read-only]",
		Short: "Mount a virtual partition's directory (TARGET, default /) at PREFIX",
		Long: `Mount the directory TARGET (default /) of virtual partition VPART at PREFIX,
or replace the entry already at PREFIX. TARGET is created first in that
partition, with any missing parents, through the partition's route in the
routing table, so VPART must be routed.`,
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			e, err := parseMount(args[0], args[1], readOnly)
			if err != nil {
				return err
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				t, err := c.Tables(ctx)
				if err != nil {
					return err
				}
				if err := g.makeTarget(ctx, c, t, e); err != nil {
					return err
				}
				if _, err := c.UpdateTables(ctx, client.TablesUpdate{SetMounts: []client.MountEntry{e}}); err != nil {
					return fmt.Errorf("mounttable add %s: %w", e.Prefix, unwrapPath(err))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "refuse changes below PREFIX")
	return cmd
}

func newMountTableRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm PREFIX",
		Short: "Remove the mount entry at PREFIX (its files stay in their partition)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				if _, err := c.UpdateTables(ctx, client.TablesUpdate{RemoveMounts: []string{args[0]}}); err != nil {
					return fmt.Errorf("mounttable rm %s: %w", args[0], unwrapPath(err))
				}
				return nil
			})
		},
	}
}

// parseMount reads PREFIX and VPART[:TARGET].
func parseMount(prefix, spec string, readOnly bool) (client.MountEntry, error) {
	vps, target, ok := strings.Cut(spec, ":")
	if !ok || target == "" {
		target = "/"
	}
	vp, err := parseVPart(vps)
	if err != nil {
		return client.MountEntry{}, err
	}
	p, err := mount.Normalize(prefix)
	if err != nil {
		return client.MountEntry{}, fmt.Errorf("mounttable add: prefix: %w", err)
	}
	tg, err := mount.Normalize(target)
	if err != nil {
		return client.MountEntry{}, fmt.Errorf("mounttable add: target: %w", err)
	}
	return client.MountEntry{Prefix: p, VPart: vp, Target: tg, ReadOnly: readOnly}, nil
}

// parseVPart reads a virtual partition number.
func parseVPart(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n >= mount.VirtualPartitions {
		return 0, fmt.Errorf("virtual partition %q: want a number below %d", s, mount.VirtualPartitions)
	}
	return uint16(n), nil
}

// makeTarget creates e's target directory, with its parents, in e's
// partition, reached through the routing table. A root partition without a
// route is the server --addr names.
func (g *globals) makeTarget(ctx context.Context, c *client.Client, t *client.Tables, e client.MountEntry) error {
	addrs := t.Route(e.VPart)
	if len(addrs) == 0 {
		if e.VPart != 0 {
			return fmt.Errorf("mounttable add %s: virtual partition %d has no route; set one with `canopy routing set %d ADDR`", e.Prefix, e.VPart, e.VPart)
		}
		if e.Target == "/" {
			return nil
		}
		return c.MkdirAll(ctx, e.Target, 0o755)
	}
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	pc, err := client.Dial(strings.Join(addrs, ","), opts)
	if err != nil {
		return fmt.Errorf("mounttable add %s: reach virtual partition %d: %w", e.Prefix, e.VPart, err)
	}
	defer pc.Close()
	if err := pc.MkdirAll(ctx, e.Target, 0o755); err != nil {
		return fmt.Errorf("mounttable add %s: create %s in virtual partition %d: %w", e.Prefix, e.Target, e.VPart, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the SDK's "op path:" prefix from err, for commands that
// name what they did themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
