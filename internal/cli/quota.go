package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/bench"
)

// quotaJSON is one quota in `canopy quota ... --json`.
type quotaJSON struct {
	Dir      uint64 `json:"dir"`
	Path     string `json:"path"`
	MaxFiles uint64 `json:"max_files"` // 0: no limit
	MaxBytes uint64 `json:"max_bytes"` // 0: no limit
	Files    uint64 `json:"files"`
	Bytes    uint64 `json:"bytes"`
}

// quotaCheckJSON is `canopy quota check --json`.
type quotaCheckJSON struct {
	Quotas     int                 `json:"quotas"`
	Repaired   bool                `json:"repaired"`
	Mismatches []quotaMismatchJSON `json:"mismatches"`
}

type quotaMismatchJSON struct {
	quotaJSON
	CountFiles uint64 `json:"count_files"`
	CountBytes uint64 `json:"count_bytes"`
}

func toQuotaJSON(q client.Quota) quotaJSON {
	return quotaJSON{Dir: uint64(q.Dir), Path: q.Path, MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes}
}

// quotaErr turns the quota calls' errors into one line that says what is
// wrong.
func quotaErr(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENODATA):
		return fmt.Errorf("no quota on %s", p)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: no such file or directory", p)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: not a directory (quotas are on directories)", p)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%s: only root may change quotas", p)
	case errors.Is(err, syscall.EXDEV):
		return fmt.Errorf("%s: a node below has hard links outside it; a quota would split them", p)
	}
	return err
}

func newQuotaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set, show and check directory quotas",
		Long: "A directory quota limits the nodes below a directory (each counted once) and the bytes of the\n" +
			"regular files below it. Operations past a limit fail with EDQUOT (\"Disk quota exceeded\");\n" +
			"df inside the directory on a mount shows the quota as the size.",
		Example: "  canopy quota set /projects/a --files 1000000 --bytes 10GiB\n  canopy quota get /projects/a\n" +
			"  canopy quota ls --json\n  canopy quota check --repair\n  canopy quota rm /projects/a",
	}
	var asJSON bool
	printQuotas := func(qs []client.Quota) error {
		if asJSON {
			out := make([]quotaJSON, len(qs))
			for i, q := range qs {
				out[i] = toQuotaJSON(q)
			}
			return json.NewEncoder(g.out).Encode(out)
		}
		w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "PATH\tFILES\tMAX FILES\tBYTES\tMAX BYTES")
		limit := func(v uint64, size bool) string {
			switch {
			case v == 0:
				return "-"
			case size:
				return bench.FormatSize(int64(v))
			}
			return fmt.Sprint(v)
		}
		for _, q := range qs {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", q.Path, q.Files, limit(q.MaxFiles, false),
				bench.FormatSize(int64(q.Bytes)), limit(q.MaxBytes, true))
		}
		return w.Flush()
	}
	var files uint64
	var bytes string
	var set *cobra.Command
	set = &cobra.Command{
		Use: "set PATH [--files N] [--bytes SIZE]", Short: "Set or change a directory's limits (0: none)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := canon(args[0])
			maxFiles, maxBytes := files, uint64(0)
			setFiles, setBytes := set.Flags().Changed("files"), set.Flags().Changed("bytes")
			if !setFiles && !setBytes {
				return fmt.Errorf("quota set %s: give --files, --bytes or both", p)
			}
			if setBytes {
				n, err := bench.ParseSize(bytes)
				if err != nil {
					return fmt.Errorf("--bytes: %w", err)
				}
				maxBytes = uint64(n)
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				if !setFiles || !setBytes {
					// A limit not given keeps its value.
					if old, err := c.GetQuota(ctx, p); err == nil {
						if !setFiles {
							maxFiles = old.MaxFiles
						}
						if !setBytes {
							maxBytes = old.MaxBytes
						}
					}
				}
				q, err := c.SetQuota(ctx, p, maxFiles, maxBytes)
				if err != nil {
					return quotaErr(p, err)
				}
				return printQuotas([]client.Quota{q})
			})
		},
	}
	set.Flags().Uint64Var(&files, "files", 0, "most nodes below the directory (0: no limit)")
	set.Flags().StringVar(&bytes, "bytes", "", "most bytes of regular files below the directory (0: no limit; KiB, MiB, GiB, TiB)")
	get := &cobra.Command{
		Use: "get PATH", Short: "Show a directory's quota and usage", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := canon(args[0])
			return g.run(func(ctx context.Context, c *client.Client) error {
				q, err := c.GetQuota(ctx, p)
				if err != nil {
					return quotaErr(p, err)
				}
				return printQuotas([]client.Quota{q})
			})
		},
	}
	ls := &cobra.Command{
		Use: "ls [PATH]", Aliases: []string{"list"}, Short: "List the quotas of the partition holding PATH (default /)", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := "/"
			if len(args) == 1 {
				p = canon(args[0])
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				qs, err := c.Quotas(ctx, p)
				if err != nil {
					return quotaErr(p, err)
				}
				return printQuotas(qs)
			})
		},
	}
	rm := &cobra.Command{
		Use: "rm PATH", Aliases: []string{"remove"}, Short: "Remove a directory's quota", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := canon(args[0])
			return g.run(func(ctx context.Context, c *client.Client) error {
				return quotaErr(p, c.RemoveQuota(ctx, p))
			})
		},
	}
	var repair bool
	check := &cobra.Command{
		Use: "check [PATH] [--repair]", Short: "Compare every quota's usage with a full count of its subtree", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := "/"
			if len(args) == 1 {
				p = canon(args[0])
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				n, bad, err := c.CheckQuotas(ctx, p, repair)
				if err != nil {
					return quotaErr(p, err)
				}
				if asJSON {
					out := quotaCheckJSON{Quotas: n, Repaired: repair && len(bad) > 0, Mismatches: []quotaMismatchJSON{}}
					for _, b := range bad {
						out.Mismatches = append(out.Mismatches, quotaMismatchJSON{toQuotaJSON(b.Quota), b.CountFiles, b.CountBytes})
					}
					return json.NewEncoder(g.out).Encode(out)
				}
				for _, b := range bad {
					verb := "differs"
					if repair {
						verb = "repaired"
					}
					fmt.Fprintf(g.out, "%s: kept %d files %d bytes, counted %d files %d bytes: %s\n",
						b.Path, b.Files, b.Bytes, b.CountFiles, b.CountBytes, verb)
				}
				fmt.Fprintf(g.out, "%d quotas checked, %d differ from a full count\n", n, len(bad))
				if len(bad) > 0 && !repair {
					return fmt.Errorf("%d quotas differ from a full count (run with --repair)", len(bad))
				}
				return nil
			})
		},
	}
	check.Flags().BoolVar(&repair, "repair", false, "set the usage to the count")
	for _, c := range []*cobra.Command{set, get, ls, check} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(set, get, ls, rm, check)
	return cmd
}
