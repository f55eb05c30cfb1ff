package cli

import (
	"context"
	"fmt"
	"path"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

func newDuCmd(g *globals) *cobra.Command {
	var summarize bool
	cmd := &cobra.Command{
		Use:   "du [-s] PATH...",
		Short: "Show bytes used by each entry of a directory (or in total with -s)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, arg := range args {
					p := canon(arg)
					fi, err := c.Lstat(ctx, p)
					if err != nil {
						return err
					}
					if summarize || !fi.IsDir() {
						if err := printDu(ctx, c, g, p); err != nil {
							return err
						}
						continue
					}
					ents, err := c.ReadDir(ctx, p)
					if err != nil {
						return err
					}
					for _, e := range ents {
						if err := printDu(ctx, c, g, path.Join(p, e.Name())); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&summarize, "summarize", "s", false, "one total per argument")
	return cmd
}

func printDu(ctx context.Context, c *client.Client, g *globals, p string) error {
	s, err := c.Summary(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.out, "%d  %s\n", s.Bytes, p)
	return nil
}

func newCountCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "count PATH...",
		Short: "Count directories, files and bytes below each path",
		Long:  "Count directories, files and bytes below each path, printed as\nDIR_COUNT FILE_COUNT CONTENT_SIZE PATHNAME (as hadoop fs -count).",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, arg := range args {
					s, err := c.Summary(ctx, canon(arg))
					if err != nil {
						return err
					}
					fmt.Fprintf(g.out, "%12d %12d %18d %s\n", s.Dirs, s.Files, s.Bytes, canon(arg))
				}
				return nil
			})
		},
	}
}

func newDfCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "df [PATH]",
		Short: "Show capacity and use",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := "/"
			if len(args) == 1 {
				p = canon(args[0])
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				s, err := c.Statfs(ctx, p)
				if err != nil {
					return err
				}
				pct := func(used, total uint64) float64 {
					if total == 0 {
						return 0
					}
					return 100 * float64(used) / float64(total)
				}
				w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(w, "Filesystem\tSize\tUsed\tAvailable\tUse%\t")
				fmt.Fprintf(w, "canopy://%s\t%d\t%d\t%d\t%.1f%%\t\n", g.addr, s.TotalBytes, s.UsedBytes, s.TotalBytes-s.UsedBytes, pct(s.UsedBytes, s.TotalBytes))
				fmt.Fprintf(w, "inodes\t%d\t%d\t%d\t%.1f%%\t\n", s.TotalInodes, s.UsedInodes, s.TotalInodes-s.UsedInodes, pct(s.UsedInodes, s.TotalInodes))
				if err := w.Flush(); err != nil {
					return err
				}
				if s.TrashFiles > 0 {
					_, err = fmt.Fprintf(g.out, "trash: %d files, %d bytes (in Used; canopy trash ls, canopy trash purge)\n", s.TrashFiles, s.TrashBytes)
				}
				return err
			})
		},
	}
}
