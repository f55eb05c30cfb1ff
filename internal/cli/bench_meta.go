package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/bench"
)

func newBenchMetaCmd(g *globals) *cobra.Command {
	var f benchFlags
	var cfg bench.MetaConfig
	var threads int
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Measure metadata operations, mdtest style",
		Long: `Measure metadata operations, mdtest style: each of --threads threads works
in its own directory under --dir (or all in one with --shared) on --files
items. create, mkdir, rename and unlink rounds end when every thread has
done its --files items or --duration passes; stat, readdir and mixed run
for --duration over --files pre-created files per thread. Without --op,
every operation runs in turn (--op all). The null call at the same
concurrency is measured first as the ceiling. Everything made is removed
afterwards unless --keep.`,
		Example: "  canopy bench meta --op stat --threads 16 --duration 5s\n" +
			"  canopy bench meta --op create --threads 16 --files 100k --shared\n" +
			"  canopy bench meta --op mixed --read-ratio 0.95 --rate 5k --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.session(g, func(ctx context.Context, cs bench.Conns) error {
				cfg.Run, cfg.Conns, cfg.CeilingTime = f.config(threads, cmd.ErrOrStderr()), cs, f.ceiling
				cfg.Dir = canonIfSet(cfg.Dir)
				results, runErr := bench.RunMeta(ctx, cfg)
				if len(results) == 0 {
					return runErr
				}
				var summary any
				if cfg.Op == "all" {
					summary = bench.Summarize("meta", "all", results)
				}
				if err := f.report(cmd.OutOrStdout(), results, summary); err != nil {
					return err
				}
				return runErr
			})
		},
	}
	fl := cmd.Flags()
	f.bind(fl)
	threads, cfg.Files, cfg.ReadRatio, cfg.Page = 16, bench.DefaultFiles, bench.DefaultReadRatio, bench.DefaultPage
	fl.StringVar(&cfg.Op, "op", "all", "create, mkdir, stat, readdir, rename, unlink, mixed, or all (each in turn)")
	fl.Var(intCount{&threads, 1}, "threads", "concurrent threads, each with one operation in flight")
	fl.Var(intCount{&cfg.Files, 1}, "files", "items per thread (per round for create, mkdir, rename, unlink)")
	fl.StringVar(&cfg.Dir, "dir", "", "directory the trees go under (default /bench-<random>)")
	fl.BoolVar(&cfg.Shared, "shared", false, "every thread works in one shared directory")
	fl.Float64Var(&cfg.ReadRatio, "read-ratio", cfg.ReadRatio, "mixed: share of stats; the rest are creates")
	fl.Var(intCount{&cfg.Page, 0}, "page", "readdir: entries per page (0 = the server's default)")
	fl.BoolVar(&cfg.Attrs, "attrs", false, "readdir: ask for attributes too (as ls -l)")
	fl.BoolVar(&cfg.Keep, "keep", false, "leave the trees in place afterwards")
	return cmd
}

// canonIfSet makes a non-empty path absolute.
func canonIfSet(p string) string {
	if p == "" {
		return ""
	}
	return canon(p)
}
