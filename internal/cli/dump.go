package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/server"
)

// `canopy dump` and `canopy load`. A dump is one partition's namespace as
// of one log position (taken by the server from its state at that point,
// however busy it is), in the binary form:
//
//	"CANOPY-DUMP\n"                       magic
//	uvarint version (1), partition, lsn, nodes, size
//	size bytes                            the namespace, in the engine's checkpoint encoding
//	32 bytes                              sha256 of the namespace bytes
//
// File contents are not in a dump: the namespace names the slices that
// hold them in the object store, which a restored server must use too.

const (
	dumpMagic   = "CANOPY-DUMP\n"
	dumpVersion = 1
)

// ErrBadDump is returned by load for a file that is not a whole dump.
var ErrBadDump = errors.New("not a canopy dump")

// dumpHeader is what precedes a dump's namespace bytes.
type dumpHeader struct {
	Partition uint16
	LSN       uint64
	Nodes     uint64
	Size      uint64
}

func (h dumpHeader) append(b []byte) []byte {
	b = append(b, dumpMagic...)
	for _, v := range []uint64{dumpVersion, uint64(h.Partition), h.LSN, h.Nodes, h.Size} {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func readDumpHeader(r *bufio.Reader) (dumpHeader, error) {
	magic := make([]byte, len(dumpMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != dumpMagic {
		return dumpHeader{}, fmt.Errorf("%w: no magic", ErrBadDump)
	}
	var v [5]uint64
	for i := range v {
		x, err := binary.ReadUvarint(r)
		if err != nil {
			return dumpHeader{}, fmt.Errorf("%w: header: %w", ErrBadDump, err)
		}
		v[i] = x
	}
	if v[0] != dumpVersion {
		return dumpHeader{}, fmt.Errorf("%w: version %d", ErrBadDump, v[0])
	}
	if v[1] > 0xffff {
		return dumpHeader{}, fmt.Errorf("%w: partition %d", ErrBadDump, v[1])
	}
	return dumpHeader{Partition: uint16(v[1]), LSN: v[2], Nodes: v[3], Size: v[4]}, nil
}

func newDumpCmd(g *globals) *cobra.Command {
	var output, format string
	var partition uint16
	cmd := &cobra.Command{
		Use:   "dump [PATH] [--output FILE]",
		Short: "Write a partition's namespace, or a subtree's, as of one point in time, to a file",
		Long: "Write the namespace of one partition (every node, attribute, xattr, symlink, hard link,\n" +
			"chunk and slice, and the tables), as of one log position, to FILE or standard output.\n" +
			"The server takes the dump from its state at that position while it goes on serving.\n" +
			"With PATH, a directory, the dump is the subtree under it, with PATH as its root: paths\n" +
			"in it are relative to PATH, and `canopy load` makes it the whole namespace of the\n" +
			"target. File contents stay in the object store. Restore with `canopy load`. Only root\n" +
			"may dump.\n\n" +
			"Through a router, a PATH with mount table entries below it (PATH / included) is dumped\n" +
			"whole as a dump set: one part per partition, each as of its own log position; `canopy\n" +
			"load --dir DIR` puts the parts in DIR/pK, the layout of `canopy up --dir DIR --partitions N`.",
		Example: "  canopy dump --output meta.dump\n  canopy --addr ROUTER dump --partition 1 --output p1.dump\n" +
			"  canopy dump /home/ann --format binary --output ann.dump",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			subtree := ""
			if len(args) == 1 && path.Clean("/"+args[0]) != "/" {
				subtree = path.Clean("/" + args[0])
				if cmd.Flags().Changed("partition") {
					return errors.New("dump: a PATH names its partition; --partition is for a whole partition")
				}
			}
			if format != "binary" && format != "json" {
				return fmt.Errorf("dump: --format %q: want json or binary", format)
			}
			var out io.Writer = g.out
			var file *os.File
			if output != "" && output != "-" {
				f, err := os.Create(output)
				if err != nil {
					return fmt.Errorf("dump: %w", err)
				}
				file, out = f, f
				defer f.Close()
			}
			if len(args) == 1 && !cmd.Flags().Changed("partition") {
				parts, err := g.planSet(path.Clean("/" + args[0]))
				if err != nil {
					return err
				}
				if parts != nil {
					return g.dumpSetTo(cmd, path.Clean("/"+args[0]), format, parts, out, file, output)
				}
			}
			var info client.DumpInfo
			var err error
			src := dumpSource{partition: partition, subtree: subtree}
			if format == "json" {
				info, err = g.dumpJSON(cmd, src, out)
			} else {
				info, err = g.dumpBinary(cmd, src, out)
			}
			if err != nil {
				return err
			}
			if file != nil {
				if err := file.Sync(); err != nil {
					return fmt.Errorf("dump: %w", err)
				}
				if err := file.Close(); err != nil {
					return fmt.Errorf("dump: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "dumped partition %d at log position %d: %d nodes, %d bytes to %s\n",
					info.Partition, info.LSN, info.Nodes, info.Total, output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the dump to this file (default standard output)")
	cmd.Flags().StringVar(&format, "format", "json", "format of the dump: json (one record per line) or binary (compact, checksummed)")
	cmd.Flags().Uint16Var(&partition, "partition", 0, "the partition to dump (through a router)")
	return cmd
}

// dumpSetTo writes the dump set of parts (see dumpset.go) to out, and
// names each part on standard error once the set is in file.
func (g *globals) dumpSetTo(cmd *cobra.Command, subtree, format string, parts []setPart, out io.Writer, file *os.File, output string) error {
	infos, err := g.dumpSet(cmd, subtree, format, parts, out)
	if err != nil {
		return err
	}
	if file == nil {
		return nil
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	for i, info := range infos {
		fmt.Fprintf(cmd.ErrOrStderr(), "dumped %s: partition %d at log position %d: %d nodes, %d bytes to %s\n",
			path.Join(subtree, parts[i].Prefix), info.Partition, info.LSN, info.Nodes, info.Total, output)
	}
	return nil
}

// dumpSource is what a dump is of: a whole partition, or the subtree
// under a path.
type dumpSource struct {
	partition uint16
	subtree   string // "": the whole partition
}

// run dumps src through c (client.Dump or DumpSubtree).
func (src dumpSource) run(ctx context.Context, c *client.Client, w io.Writer, start func(client.DumpInfo) error, progress func(uint64)) (client.DumpInfo, error) {
	if src.subtree != "" {
		return c.DumpSubtree(ctx, src.subtree, w, start, progress)
	}
	return c.Dump(ctx, src.partition, w, start, progress)
}

// dumpBinary writes the binary form of a dump to out.
func (g *globals) dumpBinary(cmd *cobra.Command, src dumpSource, out io.Writer) (client.DumpInfo, error) {
	w := bufio.NewWriterSize(out, 1<<20)
	sum := sha256.New()
	var bar *progress
	var info client.DumpInfo
	err := g.runLong(func(ctx context.Context, c *client.Client) error {
		var err error
		info, err = src.run(ctx, c, io.MultiWriter(w, sum), func(i client.DumpInfo) error {
			bar = startProgress(cmd.ErrOrStderr(), int64(i.Total), "dump")
			_, err := w.Write(dumpHeader{i.Partition, i.LSN, i.Nodes, i.Total}.append(nil))
			return err
		}, func(done uint64) {
			if bar != nil {
				bar.done.Store(int64(done))
			}
		})
		return err
	})
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return info, err
	}
	if _, err := w.Write(sum.Sum(nil)); err != nil {
		return info, fmt.Errorf("dump: %w", err)
	}
	if err := w.Flush(); err != nil {
		return info, fmt.Errorf("dump: %w", err)
	}
	return info, nil
}

// jsonDumpHead is the first line of a JSON dump; the lines of the
// namespace's JSON form (engine.CheckpointToJSON) follow.
type jsonDumpHead struct {
	T         string `json:"t"` // "dump"
	Version   int    `json:"version"`
	Partition uint16 `json:"partition"`
	LSN       uint64 `json:"lsn"`
	Nodes     uint64 `json:"nodes"`
	Path      string `json:"path,omitempty"` // a subtree's dump: the directory it is of
}

// dumpJSON writes the JSON form of a dump to out, converting the pages
// as they come.
func (g *globals) dumpJSON(cmd *cobra.Command, src dumpSource, out io.Writer) (client.DumpInfo, error) {
	pr, pw := io.Pipe()
	var bar *progress
	converted := make(chan error, 1)
	var info client.DumpInfo
	err := g.runLong(func(ctx context.Context, c *client.Client) error {
		var err error
		info, err = src.run(ctx, c, pw, func(i client.DumpInfo) error {
			bar = startProgress(cmd.ErrOrStderr(), int64(i.Nodes), "dump")
			head, _ := json.Marshal(jsonDumpHead{"dump", dumpVersion, i.Partition, i.LSN, i.Nodes, src.subtree})
			if _, err := out.Write(append(head, '\n')); err != nil {
				return fmt.Errorf("dump: %w", err)
			}
			go func() {
				err := engine.CheckpointToJSON(pr, out, func(n uint64) { bar.done.Store(int64(n)) })
				pr.CloseWithError(err)
				converted <- err
			}()
			return nil
		}, nil)
		return err
	})
	pw.CloseWithError(err)
	if bar != nil {
		err = errors.Join(err, <-converted)
		bar.finish()
	}
	return info, err
}

// runLong dials and runs fn with every call bounded by --timeout, the
// whole command only by an interrupt.
func (g *globals) runLong(fn func(ctx context.Context, c *client.Client) error) error {
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	opts.OpTimeout = g.timeout
	c, err := client.Dial(g.addr, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := interruptible()
	defer stop()
	return fn(ctx, c)
}

func newLoadCmd(g *globals) *cobra.Command {
	var dir, fromStore string
	var force bool
	var partition uint16
	cmd := &cobra.Command{
		Use:   "load --dir METADIR FILE | --from-store URL",
		Short: "Restore a dump into a metadata directory",
		Long: "Restore a dump written by `canopy dump` (FILE, or - for standard input) into METADIR,\n" +
			"the metadata directory of a server that is not running (`canopy meta --dir METADIR`,\n" +
			"or DIR/meta for `canopy up --dir DIR`). METADIR must be empty or absent unless --force,\n" +
			"which first removes what it holds. Start the server on METADIR afterwards, with the\n" +
			"same object store as the dumped one (the dump names the objects holding the files).\n" +
			"--from-store restores the newest automatic backup of --partition in the object store.\n" +
			"A dump set (a subtree over several partitions) goes into DIR/pK for each part's\n" +
			"partition K, the layout of `canopy up --dir DIR --partitions N`, with the mount table of\n" +
			"its first part mounting the others where they were.",
		Example: "  canopy load --dir /var/lib/canopy/meta meta.dump\n" +
			"  canopy load --dir /var/lib/canopy/meta --from-store s3://bucket/canopy?endpoint=...",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return errors.New("load: --dir is required")
			}
			if (fromStore == "") == (len(args) == 0) {
				return errors.New("load: name a FILE or --from-store, not both")
			}
			var in io.Reader = os.Stdin
			if fromStore != "" {
				rc, key, err := newestBackup(cmd.Context(), fromStore, partition)
				if err != nil {
					return fmt.Errorf("load: %w", err)
				}
				defer rc.Close()
				in, args = rc, []string{key}
				fmt.Fprintf(cmd.ErrOrStderr(), "restoring %s\n", key)
			} else if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("load: %w", err)
				}
				defer f.Close()
				in = f
			}
			r := bufio.NewReaderSize(in, 1<<20)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			first, _ := r.Peek(len(setMagic))
			isJSON := len(first) > 0 && first[0] == '{'
			if isJSON && strings.HasPrefix(string(first), `{"t":"dumpset"`) || string(first) == setMagic {
				parts, err := loadSet(cmd, r, dir, isJSON, force, log)
				for _, p := range parts {
					fmt.Fprintf(cmd.ErrOrStderr(), "loaded %s: partition %d (dumped at log position %d): %d nodes into %s\n",
						p.Prefix, p.head.Partition, p.head.LSN, p.head.Nodes, p.dir)
				}
				if errors.Is(err, server.ErrNotEmpty) {
					return fmt.Errorf("load: %w (use --force to replace it)", err)
				}
				if err != nil {
					return fmt.Errorf("load %s: %w", args[0], err)
				}
				return nil
			}
			if force {
				if err := os.RemoveAll(dir); err != nil {
					return fmt.Errorf("load: %w", err)
				}
			}
			var h dumpHeader
			var err error
			if isJSON {
				h, err = loadJSON(cmd, r, dir, log)
			} else {
				h, err = loadBinary(cmd, r, dir, log)
			}
			if errors.Is(err, server.ErrNotEmpty) {
				return fmt.Errorf("load: %w (use --force to replace it)", err)
			}
			if err != nil {
				return fmt.Errorf("load %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "loaded partition %d (dumped at log position %d): %d nodes into %s\n", h.Partition, h.LSN, h.Nodes, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the metadata directory to restore into")
	cmd.Flags().BoolVar(&force, "force", false, "replace what the directory holds")
	cmd.Flags().StringVar(&fromStore, "from-store", "", "restore the newest automatic backup in this object store")
	cmd.Flags().Uint16Var(&partition, "partition", 0, "with --from-store, the partition whose backup to restore")
	return cmd
}

// loadBinary restores the binary form of a dump read from r into dir.
func loadBinary(cmd *cobra.Command, r *bufio.Reader, dir string, log *slog.Logger) (dumpHeader, error) {
	return loadBinaryInto(cmd, r, func(dumpHeader) string { return dir }, log)
}

// loadBinaryInto is loadBinary into the directory into names for the
// dump's header.
func loadBinaryInto(cmd *cobra.Command, r *bufio.Reader, into func(dumpHeader) string, log *slog.Logger) (dumpHeader, error) {
	h, err := readDumpHeader(r)
	if err != nil {
		return h, err
	}
	dir := into(h)
	bar := startProgress(cmd.ErrOrStderr(), int64(h.Size), "load")
	defer bar.finish()
	sum := sha256.New()
	body := io.TeeReader(io.TeeReader(r, sum), bar)
	return h, server.Restore(server.Config{Dir: dir, Partition: h.Partition, Logger: log}, &checkedBody{r: body, sum: sum, tail: r, left: h.Size}, h.Size)
}

// loadJSON restores the JSON form of a dump read from r into dir,
// converting it to the binary form in a temporary file first (the
// checkpoint names its length before its body).
func loadJSON(cmd *cobra.Command, r *bufio.Reader, dir string, log *slog.Logger) (dumpHeader, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return dumpHeader{}, fmt.Errorf("%w: first line: %w", ErrBadDump, err)
	}
	return loadJSONLines(cmd, line, r, func(dumpHeader) string { return dir }, log)
}

// loadJSONLines is loadJSON of the dump whose first line is line and
// whose other lines r reads, into the directory into names for its head.
func loadJSONLines(cmd *cobra.Command, line []byte, r io.Reader, into func(dumpHeader) string, log *slog.Logger) (dumpHeader, error) {
	var head jsonDumpHead
	if err := json.Unmarshal(line, &head); err != nil || head.T != "dump" {
		return dumpHeader{}, fmt.Errorf("%w: first line is not a dump's head (%v)", ErrBadDump, err)
	}
	if head.Version != dumpVersion {
		return dumpHeader{}, fmt.Errorf("%w: version %d", ErrBadDump, head.Version)
	}
	h := dumpHeader{Partition: head.Partition, LSN: head.LSN, Nodes: head.Nodes}
	dir := into(h)
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return h, fmt.Errorf("restore %s: %w", dir, server.ErrNotEmpty) // before the conversion
	}
	tmp, err := os.CreateTemp("", "canopy-load-*")
	if err != nil {
		return h, err
	}
	os.Remove(tmp.Name())
	defer tmp.Close()
	bar := startProgress(cmd.ErrOrStderr(), int64(h.Nodes), "load")
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = engine.JSONToCheckpoint(r, w, func(n uint64) { bar.done.Store(int64(n)) })
	bar.finish()
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrBadDump, err)
	}
	if err := w.Flush(); err != nil {
		return h, err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return h, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return h, err
	}
	h.Size = uint64(size)
	return h, server.Restore(server.Config{Dir: dir, Partition: h.Partition, Logger: log}, bufio.NewReaderSize(tmp, 1<<20), h.Size)
}

// checkedBody reads the left bytes of a dump's namespace and, at their
// end, checks the sha256 that follows them, failing the last read with
// ErrBadDump if it does not match, so that a damaged dump is never
// restored.
type checkedBody struct {
	r    io.Reader
	sum  hash.Hash
	tail io.Reader
	left uint64
}

func (b *checkedBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if uint64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= uint64(n)
	if err == io.EOF && b.left > 0 {
		return n, fmt.Errorf("%w: cut short, %d bytes missing", ErrBadDump, b.left)
	}
	if b.left == 0 {
		want := make([]byte, sha256.Size)
		if _, err := io.ReadFull(b.tail, want); err != nil {
			return n, fmt.Errorf("%w: no checksum: %w", ErrBadDump, err)
		}
		if string(want) != string(b.sum.Sum(nil)) {
			return n, fmt.Errorf("%w: checksum mismatch", ErrBadDump)
		}
		return n, io.EOF
	}
	return n, err
}
