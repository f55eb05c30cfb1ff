package cli

import (
	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/bench"
)

func newBenchIOCmd(g *globals) *cobra.Command {
	var f benchFlags
	var cfg bench.IOConfig
	var size, buffer sizeFlag
	var storage string
	cmd := &cobra.Command{
		Use:   "io",
		Short: "Measure file I/O: write then read N files of size S with P workers",
		Long: `Measure file I/O, TestDFSIO style: --workers workers write --files files of
--size bytes each (through the SDK: buffered, uploaded to the object
store, committed on close), then read them back. It reports MiB/s for each
phase, files per second, and the fixed cost of a file (create, commit and
close with no data, measured on empty files first) with its share of the
write time; above 20 % the result measures metadata, not bytes, and says
so. Everything is removed afterwards unless --keep.`,
		Example: "  canopy bench io --files 4 --size 1GiB --workers 4\n" +
			"  canopy bench io --files 10k --size 4KiB --workers 16 --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := g.clientOptions()
			if err != nil {
				return err
			}
			opts.OpTimeout, opts.Storage = g.timeout, storage
			cs, err := bench.Dial(g.addr, opts, f.conns)
			if err != nil {
				return err
			}
			defer cs.Close()
			ctx, stop := interruptible()
			defer stop()
			cfg.Conns, cfg.Size, cfg.Buffer, cfg.Progress = cs, size.v, int(buffer.v), cmd.ErrOrStderr()
			cfg.Dir = canonIfSet(cfg.Dir)
			res, err := bench.RunIO(ctx, cfg)
			if err != nil {
				return err
			}
			if f.json {
				return bench.WriteJSON(cmd.OutOrStdout(), res)
			}
			return bench.WriteIOTable(cmd.OutOrStdout(), res)
		},
	}
	fl := cmd.Flags()
	f.conns = 1
	fl.Var(intCount{&f.conns, 1}, "conns", "client connections the workers share (each is multiplexed)")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object on the last line")
	cfg.Files, cfg.Workers, size.v, buffer.v = 4, 4, 64<<20, 1<<20
	fl.Var(intCount{&cfg.Files, 1}, "files", "files to write and read")
	fl.Var(&size, "size", "bytes per file (suffixes KiB, MiB, GiB or k, M, G)")
	fl.Var(intCount{&cfg.Workers, 1}, "workers", "files in flight at once")
	fl.Var(&buffer, "buffer", "bytes per Write and Read call")
	fl.StringVar(&cfg.Dir, "dir", "", "directory the files go under (default /bench-io-<random>)")
	fl.BoolVar(&cfg.Keep, "keep", false, "leave the files in place afterwards")
	fl.StringVar(&storage, "storage", "", "object store URL to use instead of the one the server names")
	return cmd
}

// sizeFlag is a byte size flag: plain numbers or KiB, MiB, GiB suffixes.
type sizeFlag struct{ v int64 }

func (s *sizeFlag) String() string { return bench.FormatSize(s.v) }

func (s *sizeFlag) Set(v string) error {
	n, err := bench.ParseSize(v)
	if err != nil {
		return err
	}
	s.v = n
	return nil
}

func (*sizeFlag) Type() string { return "size" }
