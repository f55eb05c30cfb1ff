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

// trashEntryJSON is one entry in `canopy trash ls --json`.
type trashEntryJSON struct {
	Hour    string `json:"hour"`
	Name    string `json:"name"`
	Ino     uint64 `json:"ino"`
	Path    string `json:"path"` // "" if its directory is gone
	Removed string `json:"removed"`
	Dir     bool   `json:"dir"`
	Files   uint64 `json:"files"`
	Bytes   uint64 `json:"bytes"`
}

// trashJSON is `canopy trash ls --json`.
type trashJSON struct {
	Days    int              `json:"days"` // 0: the trash is off
	Files   uint64           `json:"files"`
	Bytes   uint64           `json:"bytes"`
	Entries []trashEntryJSON `json:"entries"`
}

// trashRestoreJSON is `canopy trash restore --json`.
type trashRestoreJSON struct {
	Restored []string `json:"restored"`
	Failed   []string `json:"failed"`
}

// trashErr turns the trash calls' errors into one line that says what is
// wrong; what names the entry or path asked for.
func trashErr(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("trash: only root may see and change the trash")
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("restore %s: file exists", what)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("restore %s: its directory is gone", what)
	}
	return err
}

func newTrashCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trash",
		Short: "List, restore and purge what removals kept",
		Long: "With --trash-days D on the servers (canopy up and canopy meta: 1 by default), a removed file or tree\n" +
			"goes to /.trash/<hour>/<parent>-<ino>-<name> of its partition for D days instead of being freed.\n" +
			"Each partition has its own trash: --in names a path in the partition to address (default /).",
		Example: "  canopy trash ls\n  canopy trash restore /projects/a      # a tree, by its original path\n" +
			"  canopy trash restore 2026-12-02-10    # a whole hour\n  canopy trash purge --older-than 12h\n  canopy trash purge --all",
	}
	var asJSON bool
	var in string
	list := func(ctx context.Context, c *client.Client) (client.Trash, error) {
		tr, err := c.TrashList(ctx, canon(in))
		return tr, trashErr(in, err)
	}
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List what the trash holds", Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				tr, err := list(ctx, c)
				if err != nil {
					return err
				}
				if asJSON {
					out := trashJSON{Days: tr.Days, Files: tr.Files, Bytes: tr.Bytes, Entries: []trashEntryJSON{}}
					for _, e := range tr.Entries {
						out.Entries = append(out.Entries, trashEntryJSON{Hour: e.Hour, Name: e.Name, Ino: uint64(e.Ino),
							Path: e.Path, Removed: e.Removed.Format(time.RFC3339), Dir: e.Dir, Files: e.Files, Bytes: e.Bytes})
					}
					return json.NewEncoder(g.out).Encode(out)
				}
				w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "REMOVED\tSIZE\tPATH\tENTRY")
				for _, e := range tr.Entries {
					p := e.Path
					if p == "" {
						p = "?/" + e.Orig
					}
					if e.Dir {
						p += "/"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\n", e.Removed.Format("2006-01-02 15:04:05"),
						bench.FormatSize(int64(e.Bytes)), p, e.Hour, e.Name)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				days := fmt.Sprintf("kept %d days", tr.Days)
				if tr.Days == 0 {
					days = "the trash is off"
				}
				fmt.Fprintf(g.out, "%d entries, %d files, %s; %s\n", len(tr.Entries), tr.Files, bench.FormatSize(int64(tr.Bytes)), days)
				return nil
			})
		},
	}
	restore := &cobra.Command{
		Use:   "restore PATH|HOUR|HOUR/ENTRY",
		Short: "Put what the trash holds back where it was: a tree by its original path, an hour, or one entry",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			arg := args[0]
			return g.run(func(ctx context.Context, c *client.Client) error {
				tr, err := list(ctx, c)
				if err != nil {
					return err
				}
				var picked []client.TrashEntry
				byPath := strings.HasPrefix(arg, "/")
				for _, e := range tr.Entries {
					switch {
					case byPath && (e.Path == arg || strings.HasPrefix(e.Path, strings.TrimSuffix(arg, "/")+"/")):
					case !byPath && (e.Hour == arg || e.Hour+"/"+e.Name == arg):
					default:
						continue
					}
					picked = append(picked, e)
				}
				if len(picked) == 0 {
					return fmt.Errorf("restore %s: not in the trash", arg)
				}
				out := trashRestoreJSON{Restored: []string{}, Failed: []string{}}
				done := map[string]bool{}
				for _, e := range picked {
					if done[e.Path] && e.Path != "" {
						continue // came back as the directory of another
					}
					paths, failed, err := c.TrashRestore(ctx, canon(in), e.Hour, e.Name)
					if err != nil {
						what := e.Path
						if what == "" {
							what = e.Hour + "/" + e.Name
						}
						out.Failed = append(out.Failed, trashErr(what, err).Error())
						continue
					}
					for _, p := range paths {
						done[p] = true
					}
					out.Restored = append(out.Restored, paths...)
					if failed != "" {
						out.Failed = append(out.Failed, strings.Split(failed, "\n")...)
					}
				}
				if asJSON {
					if err := json.NewEncoder(g.out).Encode(out); err != nil {
						return err
					}
				} else {
					for _, p := range out.Restored {
						fmt.Fprintf(g.out, "restored %s\n", p)
					}
				}
				switch len(out.Failed) {
				case 0:
					return nil
				case 1:
					return errors.New(out.Failed[0])
				}
				return fmt.Errorf("%s (and %d more)", out.Failed[0], len(out.Failed)-1)
			})
		},
	}
	var olderThan time.Duration
	var all bool
	purge := &cobra.Command{
		Use: "purge --older-than DURATION | --all", Short: "Free what the trash holds now instead of when it expires", Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if !all && olderThan <= 0 {
				return fmt.Errorf("trash purge: give --older-than DURATION (e.g. 12h) or --all")
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				files, bytes, err := c.TrashPurge(ctx, canon(in), olderThan, all)
				if err != nil {
					return trashErr(in, err)
				}
				if asJSON {
					return json.NewEncoder(g.out).Encode(map[string]uint64{"files": files, "bytes": bytes})
				}
				fmt.Fprintf(g.out, "freed %d files, %s\n", files, bench.FormatSize(int64(bytes)))
				return nil
			})
		},
	}
	purge.Flags().DurationVar(&olderThan, "older-than", 0, "free the hours that ended at least this long ago")
	purge.Flags().BoolVar(&all, "all", false, "free everything the trash holds")
	for _, c := range []*cobra.Command{ls, restore, purge} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		c.Flags().StringVar(&in, "in", "/", "a path in the partition whose trash to address")
	}
	cmd.AddCommand(ls, restore, purge)
	return cmd
}
