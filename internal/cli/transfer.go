package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

// copyBuf is the buffer size of one file copy.
const copyBuf = 1 << 20

// dataFlags are the flags of commands that move file data.
type dataFlags struct {
	storage  string
	parallel int
}

func (f *dataFlags) bind(cmd *cobra.Command, parallel bool) {
	cmd.Flags().StringVar(&f.storage, "storage", os.Getenv("CANOPY_STORAGE"),
		"object store URL to use instead of the one the server names, e.g. with credentials (env CANOPY_STORAGE)")
	if parallel {
		f.parallel = 4
		cmd.Flags().VarP(intCount{&f.parallel, 1}, "parallel", "p", "files copied at once")
	}
}

// runData dials for a data command: every call is bounded by --timeout,
// the whole command only by an interrupt.
func (g *globals) runData(f *dataFlags, fn func(ctx context.Context, c *client.Client) error) error {
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	opts.OpTimeout, opts.Storage = g.timeout, f.storage
	c, err := client.Dial(g.addr, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := interruptible()
	defer stop()
	return fn(ctx, c)
}

// copyJob copies one file: open opens the source, create the target.
type copyJob struct {
	src, dst string
	size     int64
	open     func() (io.ReadCloser, error)
	create   func() (io.WriteCloser, error)
}

// runCopies runs jobs with par at once, showing progress on errOut, and
// returns the first error.
func runCopies(errOut io.Writer, jobs []copyJob, par int, what string) error {
	var total int64
	for _, j := range jobs {
		total += j.size
	}
	p := startProgress(errOut, total, what)
	defer p.finish()
	work := make(chan copyJob)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range min(par, max(1, len(jobs))) {
		wg.Go(func() {
			buf := make([]byte, copyBuf)
			for j := range work {
				if err := copyOne(j, p, buf); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, j := range jobs {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		work <- j
	}
	close(work)
	wg.Wait()
	return first
}

func copyOne(j copyJob, p *progress, buf []byte) error {
	r, err := j.open()
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := j.create()
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(struct{ io.Writer }{w}, io.TeeReader(r, p), buf); err != nil {
		w.Close()
		return fmt.Errorf("copy %s to %s: %w", j.src, j.dst, err)
	}
	return w.Close()
}

// remoteTarget is where a copy of src goes when the target named is dst:
// inside dst if it is an existing directory.
func remoteTarget(ctx context.Context, c *client.Client, src, dst string) string {
	if fi, err := c.Stat(ctx, dst); err == nil && fi.IsDir() {
		return path.Join(dst, path.Base(src))
	}
	return dst
}

func localTarget(src, dst string) string {
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return filepath.Join(dst, path.Base(src))
	}
	return dst
}

func newPutCmd(g *globals) *cobra.Command {
	var f dataFlags
	cmd := &cobra.Command{
		Use:   "put LOCAL REMOTE",
		Short: "Copy a local file or directory tree into Canopy",
		Long: `Copy a local file or directory tree into Canopy, several files at once.
If REMOTE is an existing directory, LOCAL goes inside it. Files that exist
are overwritten. A progress bar shows on a terminal when the copy takes
more than a second.`,
		Example: "  canopy put big.bin /data/big.bin\n  canopy put -p 8 ./logs /data/",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runData(&f, func(ctx context.Context, c *client.Client) error {
				src := args[0]
				dst := remoteTarget(ctx, c, src, canon(args[1]))
				jobs, err := putJobs(ctx, c, src, dst)
				if err != nil {
					return err
				}
				return runCopies(cmd.ErrOrStderr(), jobs, f.parallel, "put")
			})
		},
	}
	f.bind(cmd, true)
	return cmd
}

// putJobs makes the directories of the tree at src under dst and returns
// the copies of its regular files.
func putJobs(ctx context.Context, c *client.Client, src, dst string) ([]copyJob, error) {
	var jobs []copyJob
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := path.Join(dst, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return c.MkdirAll(ctx, to, uint32(info.Mode().Perm()))
		case info.Mode().IsRegular():
			jobs = append(jobs, copyJob{
				src: p, dst: to, size: info.Size(),
				open: func() (io.ReadCloser, error) { return os.Open(p) },
				create: func() (io.WriteCloser, error) {
					return c.OpenFile(ctx, to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
				},
			})
		default:
			fmt.Fprintf(os.Stderr, "canopy: put: skipping %s: not a regular file or directory\n", p)
		}
		return nil
	})
	return jobs, err
}

func newGetCmd(g *globals) *cobra.Command {
	var f dataFlags
	cmd := &cobra.Command{
		Use:   "get REMOTE LOCAL",
		Short: "Copy a file or directory tree from Canopy to the local disk",
		Long: `Copy a file or directory tree from Canopy to the local disk, several files
at once. If LOCAL is an existing directory, REMOTE goes inside it.`,
		Example: "  canopy get /data/big.bin ./big.bin\n  canopy get -p 8 /data/logs .",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runData(&f, func(ctx context.Context, c *client.Client) error {
				src := canon(args[0])
				dst := localTarget(src, args[1])
				jobs, err := treeJobs(ctx, c, src, dst, func(to string, d fs.DirEntry, perm fs.FileMode) (func() (io.WriteCloser, error), error) {
					if d.IsDir() {
						return nil, os.MkdirAll(to, perm|0o700)
					}
					return func() (io.WriteCloser, error) {
						return os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
					}, nil
				}, filepath.Join)
				if err != nil {
					return err
				}
				return runCopies(cmd.ErrOrStderr(), jobs, f.parallel, "get")
			})
		},
	}
	f.bind(cmd, true)
	return cmd
}

func newCpCmd(g *globals) *cobra.Command {
	var f dataFlags
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file or directory tree within Canopy",
		Long: `Copy a file or directory tree within Canopy, several files at once. If DST
is an existing directory, SRC goes inside it.`,
		Example: "  canopy cp /data/a /data/b\n  canopy cp /data/2026 /backup/",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runData(&f, func(ctx context.Context, c *client.Client) error {
				src := canon(args[0])
				dst := remoteTarget(ctx, c, src, canon(args[1]))
				if dst == src || len(dst) > len(src) && dst[:len(src)+1] == src+"/" {
					return fmt.Errorf("cp: cannot copy %s into itself (%s)", src, dst)
				}
				jobs, err := treeJobs(ctx, c, src, dst, func(to string, d fs.DirEntry, perm fs.FileMode) (func() (io.WriteCloser, error), error) {
					if d.IsDir() {
						return nil, c.MkdirAll(ctx, to, uint32(perm))
					}
					return func() (io.WriteCloser, error) {
						return c.OpenFile(ctx, to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
					}, nil
				}, func(elem ...string) string { return path.Join(elem...) })
				if err != nil {
					return err
				}
				return runCopies(cmd.ErrOrStderr(), jobs, f.parallel, "cp")
			})
		},
	}
	f.bind(cmd, true)
	return cmd
}

// treeJobs walks the Canopy tree at src. For each directory and regular
// file it calls target with its destination (join(dst, rel)); for a file
// target returns how to create the copy.
func treeJobs(ctx context.Context, c *client.Client, src, dst string,
	target func(to string, d fs.DirEntry, perm fs.FileMode) (func() (io.WriteCloser, error), error),
	join func(elem ...string) string) ([]copyJob, error) {
	fi, err := c.Stat(ctx, src)
	if err != nil {
		return nil, err
	}
	root, start := path.Dir(src), path.Base(src)
	if src == "/" {
		root, start = "/", "."
	}
	fsys := c.FS(ctx, root)
	var jobs []copyJob
	err = fs.WalkDir(fsys, start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "."
		if p != start {
			rel = p[len(start)+1:]
			if start == "." {
				rel = p
			}
		}
		to := join(dst, rel)
		if rel == "." {
			to = dst
		}
		info, err := d.Info()
		if err != nil {
			if p != start {
				return err
			}
			info = fi
		}
		if !d.IsDir() && !info.Mode().IsRegular() {
			fmt.Fprintf(os.Stderr, "canopy: skipping %s: not a regular file or directory\n", path.Join(root, p))
			return nil
		}
		create, err := target(to, d, info.Mode().Perm())
		if err != nil || create == nil {
			return err
		}
		from := path.Join(root, p)
		jobs = append(jobs, copyJob{
			src: from, dst: to, size: info.Size(), create: create,
			open: func() (io.ReadCloser, error) { return c.Open(ctx, from) },
		})
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return nil, err
	}
	return jobs, nil
}

func newCatCmd(g *globals) *cobra.Command {
	var f dataFlags
	cmd := &cobra.Command{
		Use:     "cat PATH...",
		Short:   "Write files' contents to standard output",
		Example: "  canopy cat /data/notes.txt",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.runData(&f, func(ctx context.Context, c *client.Client) error {
				buf := make([]byte, copyBuf)
				for _, p := range args {
					file, err := c.Open(ctx, canon(p))
					if err != nil {
						return err
					}
					_, err = io.CopyBuffer(g.out, file, buf)
					file.Close()
					if err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f.bind(cmd, false)
	return cmd
}
