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
	Quotas          int                 `json:"quotas"` // directory quotas checked
	Repaired        bool                `json:"repaired"`
	Mismatches      []quotaMismatchJSON `json:"mismatches"`
	OwnerQuotas     int                 `json:"owner_quotas"` // user and group quotas checked
	OwnerMismatches []ownerMismatchJSON `json:"owner_mismatches"`
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
		Short: "Set, show and check directory, user and group quotas",
		Long: "A directory quota limits the nodes below a directory (each counted once) and the bytes of the\n" +
			"regular files below it. Operations past a limit fail with EDQUOT (\"Disk quota exceeded\");\n" +
			"df inside the directory on a mount shows the quota as the size.\n" +
			"A user (--uid) or group (--gid) quota limits the nodes a uid or gid owns and their bytes, in\n" +
			"one partition: a PATH given with --uid or --gid only picks the partition (default /).",
		Example: "  canopy quota set /projects/a --files 1000000 --bytes 10GiB\n  canopy quota get /projects/a\n" +
			"  canopy quota set --uid 1000 --files 50000 --bytes 100GiB\n  canopy quota get --gid 2000 --json\n" +
			"  canopy quota ls --json\n  canopy quota ls --uid\n  canopy quota check --repair\n  canopy quota rm /projects/a\n" +
			"  canopy quota rm --uid 1000",
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
		for _, q := range qs {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", q.Path, q.Files, quotaLimit(q.MaxFiles, false),
				bench.FormatSize(int64(q.Bytes)), quotaLimit(q.MaxBytes, true))
		}
		return w.Flush()
	}
	var files uint64
	var bytes string
	var set *cobra.Command
	var setOwner, getOwner, lsOwner, rmOwner, checkOwner ownerFlags
	set = &cobra.Command{
		Use: "set PATH | --uid U | --gid G [--files N] [--bytes SIZE]", Short: "Set or change a directory's, a uid's or a gid's limits (0: none)", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && !setOwner.given() {
				return errors.New("quota set: give a directory, --uid or --gid")
			}
			maxFiles, maxBytes := files, uint64(0)
			setFiles, setBytes := set.Flags().Changed("files"), set.Flags().Changed("bytes")
			if !setFiles && !setBytes {
				what := "--uid " + setOwner.uid
				switch {
				case setOwner.gid != "":
					what = "--gid " + setOwner.gid
				case !setOwner.given():
					what = canon(args[0])
				}
				return fmt.Errorf("quota set %s: give --files, --bytes or both", what)
			}
			if setBytes {
				n, err := bench.ParseSize(bytes)
				if err != nil {
					return fmt.Errorf("--bytes: %w", err)
				}
				maxBytes = uint64(n)
			}
			if setOwner.given() {
				return setOwnerQuota(g, &setOwner, args, maxFiles, setFiles, setBytes, maxBytes, asJSON)
			}
			p := canon(args[0])
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
	set.Flags().Uint64Var(&files, "files", 0, "most nodes below the directory, or owned by the uid or gid (0: no limit)")
	set.Flags().StringVar(&bytes, "bytes", "", "most bytes of regular files below the directory, or owned by the uid or gid (0: no limit; KiB, MiB, GiB, TiB)")
	get := &cobra.Command{
		Use: "get PATH | --uid U | --gid G", Short: "Show a directory's, a uid's or a gid's quota and usage", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if getOwner.given() {
				return getOwnerQuotas(g, &getOwner, args, asJSON)
			}
			if len(args) == 0 {
				return errors.New("quota get: give a directory, --uid or --gid")
			}
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
		Use: "ls [PATH] [--uid | --gid]", Aliases: []string{"list"}, Short: "List the directory (or user, or group) quotas of the partition holding PATH (default /)", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if lsOwner.given() {
				if len(args) == 1 && (lsOwner.uid == allIDs || lsOwner.gid == allIDs) && isNumber(args[0]) {
					// "--uid 7": a bare flag and a number, meant as --uid=7.
					if lsOwner.uid == allIDs {
						lsOwner.uid = args[0]
					} else {
						lsOwner.gid = args[0]
					}
					args = nil
				}
				return getOwnerQuotas(g, &lsOwner, args, asJSON)
			}
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
		Use: "rm PATH | --uid U | --gid G", Aliases: []string{"remove"}, Short: "Remove a directory's, a uid's or a gid's quota", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if rmOwner.given() {
				return removeOwnerQuota(g, &rmOwner, args)
			}
			if len(args) == 0 {
				return errors.New("quota rm: give a directory, --uid or --gid")
			}
			p := canon(args[0])
			return g.run(func(ctx context.Context, c *client.Client) error {
				return quotaErr(p, c.RemoveQuota(ctx, p))
			})
		},
	}
	var repair bool
	check := &cobra.Command{
		Use: "check [PATH] [--repair] [--uid | --gid]", Short: "Compare every quota's usage with a full count (--uid or --gid: the user and group quotas only)", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := "/"
			if len(args) == 1 {
				p = canon(args[0])
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				var n int
				var bad []client.QuotaMismatch
				var err error
				if !checkOwner.given() {
					if n, bad, err = c.CheckQuotas(ctx, p, repair); err != nil {
						return quotaErr(p, err)
					}
				}
				on, obad, err := c.CheckOwnerQuotas(ctx, p, repair)
				if err != nil {
					return quotaErr(p, err)
				}
				if asJSON {
					out := quotaCheckJSON{Quotas: n, Repaired: repair && len(bad)+len(obad) > 0, Mismatches: []quotaMismatchJSON{},
						OwnerQuotas: on, OwnerMismatches: []ownerMismatchJSON{}}
					for _, b := range bad {
						out.Mismatches = append(out.Mismatches, quotaMismatchJSON{toQuotaJSON(b.Quota), b.CountFiles, b.CountBytes})
					}
					for _, b := range obad {
						out.OwnerMismatches = append(out.OwnerMismatches, ownerMismatchJSON{toOwnerQuotaJSON(b.OwnerQuota), b.CountFiles, b.CountBytes})
					}
					return json.NewEncoder(g.out).Encode(out)
				}
				verb := "differs"
				if repair {
					verb = "repaired"
				}
				for _, b := range bad {
					fmt.Fprintf(g.out, "%s: kept %d files %d bytes, counted %d files %d bytes: %s\n",
						b.Path, b.Files, b.Bytes, b.CountFiles, b.CountBytes, verb)
				}
				for _, b := range obad {
					fmt.Fprintf(g.out, "%s: kept %d files %d bytes, counted %d files %d bytes: %s\n",
						ownerName(b.Kind, b.ID), b.Files, b.Bytes, b.CountFiles, b.CountBytes, verb)
				}
				if !checkOwner.given() {
					fmt.Fprintf(g.out, "%d quotas checked, %d differ from a full count\n", n, len(bad))
				}
				if on > 0 || checkOwner.given() {
					fmt.Fprintf(g.out, "%d user and group quotas checked, %d differ from a full count\n", on, len(obad))
				}
				if k := len(bad) + len(obad); k > 0 && !repair {
					return fmt.Errorf("%d quotas differ from a full count (run with --repair)", k)
				}
				return nil
			})
		},
	}
	check.Flags().BoolVar(&repair, "repair", false, "set the usage to the count")
	for _, c := range []*cobra.Command{set, get, ls, check} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	setOwner.add(set, false)
	getOwner.add(get, false)
	lsOwner.add(ls, true)
	rmOwner.add(rm, false)
	checkOwner.add(check, true)
	cmd.AddCommand(set, get, ls, rm, check)
	return cmd
}
