package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/bench"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/server"
)

func newBenchMemoryCmd() *cobra.Command {
	var cfg bench.MemoryConfig
	var asJSON bool
	var big bench.BigDirConfig
	var save string
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Measure the metadata engine's memory per file, in this process",
		Long: `Measure what a namespace costs in memory: build --files files (mdtest
names, spread evenly over --dirs directories) in a metadata engine inside
this process, applying the creates as the server's apply loop does, and
report resident memory and Go heap in use before and after (each after a
full collection), bytes per file, the GC pauses during the build, the
build's time, and the mean and p99 time of getattr and lookup on random
files of the finished tree. No server is involved: --addr is not used.

With --big-dir N it measures one directory of N entries instead: creates,
random lookups, paged readdir and rm -r's removal, each per second at its
first and its last --window entries, and resident bytes per entry.

With --save DIR the tree, once built and measured, is also written to DIR
(empty or absent) as the metadata directory of partition 0, which
canopy meta --dir DIR starts from: a large partition for restart and
checkpoint measurements without filling it over the network.`,
		Example: "  canopy bench memory --files 1m\n" +
			"  canopy bench memory --files 10m --dirs 10k --json\n" +
			"  canopy bench memory --big-dir 10m",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = cmd.ErrOrStderr()
			if big.Entries > 0 {
				big.Progress, big.Seed = cfg.Progress, cfg.Seed
				res, err := bench.RunBigDir(big)
				if err != nil {
					return err
				}
				if asJSON {
					return bench.WriteJSON(cmd.OutOrStdout(), res)
				}
				return bench.WriteBigDirTable(cmd.OutOrStdout(), res)
			}
			if save != "" {
				// Refused now rather than after the build.
				if ents, err := os.ReadDir(save); err == nil && len(ents) > 0 {
					return fmt.Errorf("bench memory --save %s: %w", save, server.ErrNotEmpty)
				}
				cfg.Save = func(e *engine.Engine) error {
					return server.SaveEngine(server.Config{Dir: save, Partition: e.Partition(), Logger: slog.New(slog.DiscardHandler)}, e)
				}
			}
			res, err := bench.RunMemory(cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return bench.WriteJSON(cmd.OutOrStdout(), res)
			}
			return bench.WriteMemoryTable(cmd.OutOrStdout(), res)
		},
	}
	fl := cmd.Flags()
	cfg.Files, cfg.Samples = bench.DefaultMemoryFiles, bench.DefaultMemorySamples
	fl.Var(intCount{&cfg.Files, 1}, "files", "files in the tree")
	fl.Var(intCount{&cfg.Dirs, 0}, "dirs", "directories the files are spread over (default files/1000, at least 1)")
	fl.Var(intCount{&cfg.Samples, 1}, "samples", "random getattrs and lookups timed after the build (each)")
	fl.DurationVar(&cfg.SampleTime, "sample-time", bench.DefaultSampleTime, "longest each of the getattr and lookup passes lasts")
	fl.Var(intCount{&big.Entries, 0}, "big-dir", "measure one directory of this many entries instead of a tree (0 = off)")
	fl.Var(intCount{&big.Window, 0}, "window", "with --big-dir: operations timed at the start and the end of each pass (default 1m, at most half)")
	fl.Uint64Var(&cfg.Seed, "seed", 0, "seed for the sampled files (0 = random)")
	fl.StringVar(&save, "save", "", "also write the built tree to this directory as a partition's metadata directory (canopy meta --dir)")
	fl.BoolVar(&asJSON, "json", false, "print the result as one JSON object on the last line")
	return cmd
}
