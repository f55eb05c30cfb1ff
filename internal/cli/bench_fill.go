package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/bench"
)

func newBenchFillCmd(g *globals) *cobra.Command {
	var f benchFlags
	var cfg bench.FillConfig
	cmd := &cobra.Command{
		Use:   "fill",
		Short: "Build the memory benchmark's tree on a running server",
		Long: `Create the tree that 'canopy bench memory' builds in process (--files files
named file.mdtest.0.<i>, spread evenly over --dirs directories
mdtest_tree.<k> under mdtest_tree.0) on a running server, with --workers
creates in flight, and report the time it took. Read the server's
process_resident_memory_bytes and canopy_meta_inodes before and after to
get its memory per file (bench/memory.sh does). The tree stays.`,
		Example: "  canopy bench fill --files 1m --dirs 1k --workers 64 --conns 4",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.session(g, func(ctx context.Context, cs bench.Conns) error {
				cfg.Conns, cfg.Progress = cs, cmd.ErrOrStderr()
				cfg.Dir = canonIfSet(cfg.Dir)
				res, err := bench.RunFill(ctx, cfg)
				if err != nil {
					return err
				}
				if f.json {
					return bench.WriteJSON(cmd.OutOrStdout(), res)
				}
				return bench.WriteFillTable(cmd.OutOrStdout(), res)
			})
		},
	}
	fl := cmd.Flags()
	f.conns = 4
	fl.Var(intCount{&f.conns, 1}, "conns", "client connections the workers share (each is multiplexed)")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object on the last line")
	cfg.Files, cfg.Workers = bench.DefaultMemoryFiles, bench.DefaultFillWorkers
	fl.Var(intCount{&cfg.Files, 1}, "files", "files in the tree")
	fl.Var(intCount{&cfg.Dirs, 0}, "dirs", "directories the files are spread over (default files/1000, at least 1)")
	fl.Var(intCount{&cfg.Workers, 1}, "workers", "creates in flight")
	fl.StringVar(&cfg.Dir, "dir", "/", "directory the tree's top (mdtest_tree.0) is made in")
	return cmd
}
