package linearize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"syscall"

	"github.com/canopyfs/canopy/client"
)

// DataSize is the length of every Write's data, so that a write replaces
// the whole content in one commit and a read sees one write or another.
const DataSize = 8

// Workload generates operations over Dirs, a set of directories the test
// creates first. Names n0..n(Names-1) are created, removed, renamed,
// linked and stat'ed; each directory also holds Files data files f0..,
// made by Setup, which are only written, read, chmod'ed and stat'ed, so
// that a path names the same file from a write's open to its commit.
type Workload struct {
	Dirs         []string
	Names        int
	Files        int
	CrossPercent int // of renames and links, how many go to another directory
}

// Setup creates the directories and data files through c.
func (w Workload) Setup(ctx context.Context, c *client.Client) error {
	for _, d := range w.Dirs {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			return fmt.Errorf("setup %s: %w", d, err)
		}
		for i := range w.Files {
			if _, err := c.Create(ctx, fmt.Sprintf("%s/f%d", d, i), 0o644); err != nil {
				return fmt.Errorf("setup %s: %w", d, err)
			}
		}
	}
	return nil
}

// Initial returns the operations that make Setup's files, as returned
// creates, to start a history that the model checks from empty.
func (w Workload) Initial(h *History) {
	for _, d := range w.Dirs {
		for i := range w.Files {
			h.Invoke(0, Input{Kind: Create, Path: fmt.Sprintf("%s/f%d", d, i)}).Return(Output{})
		}
	}
}

// Next draws an operation, in one directory chosen at random.
func (w Workload) Next(rng *rand.Rand) Input {
	d := w.Dirs[rng.IntN(len(w.Dirs))]
	name := func() string { return fmt.Sprintf("%s/n%d", d, rng.IntN(w.Names)) }
	file := func() string { return fmt.Sprintf("%s/f%d", d, rng.IntN(w.Files)) }
	// Renames and links join two directories only with CrossPercent
	// chance: a history whose directories are all joined is checked as one,
	// which takes far longer.
	other := func() string {
		if rng.IntN(100) < w.CrossPercent {
			return fmt.Sprintf("%s/n%d", w.Dirs[rng.IntN(len(w.Dirs))], rng.IntN(w.Names))
		}
		return name()
	}
	switch r := rng.IntN(100); {
	case r < 15:
		return Input{Kind: Create, Path: name()}
	case r < 20:
		return Input{Kind: Mkdir, Path: name()}
	case r < 30:
		return Input{Kind: Unlink, Path: name()}
	case r < 33:
		return Input{Kind: Rmdir, Path: name()}
	case r < 45:
		return Input{Kind: Rename, Path: name(), Path2: other()}
	case r < 50:
		return Input{Kind: Link, Path: name(), Path2: other()}
	case r < 55:
		return Input{Kind: Chmod, Path: file(), Mode: 0o600 | uint32(rng.IntN(8))<<3}
	case r < 70:
		return Input{Kind: Write, Path: file(), Data: fmt.Sprintf("%0*x", DataSize, rng.Uint32())}
	case r < 85:
		return Input{Kind: Read, Path: file()}
	default:
		if rng.IntN(2) == 0 {
			return Input{Kind: Stat, Path: name()}
		}
		return Input{Kind: Stat, Path: file()}
	}
}

// Do makes the operation through c and returns its answer: an errno for
// a failure the file system reports, Unknown for any other (a timeout, a
// lost connection, a group without a leader), whose effect is not known.
func Do(ctx context.Context, c *client.Client, in Input) Output {
	var err error
	out := Output{}
	switch in.Kind {
	case Create:
		_, err = c.Create(ctx, in.Path, 0o644)
	case Mkdir:
		_, err = c.Mkdir(ctx, in.Path, 0o755)
	case Unlink:
		err = c.Unlink(ctx, in.Path)
	case Rmdir:
		err = c.Rmdir(ctx, in.Path)
	case Rename:
		err = c.Rename(ctx, in.Path, in.Path2)
	case Link:
		_, err = c.Link(ctx, in.Path, in.Path2)
	case Chmod:
		_, err = c.Chmod(ctx, in.Path, in.Mode)
	case Write:
		err = writeAt0(ctx, c, in.Path, in.Data)
	case Read:
		out.Data, err = readAll(ctx, c, in.Path)
	case Stat:
		var fi *client.FileInfo
		if fi, err = c.Stat(ctx, in.Path); err == nil {
			a := fi.Attr()
			out.Dir, out.Perm, out.Nlink, out.Size = fi.IsDir(), a.Mode&0o7777, a.Nlink, a.Size
		}
	default:
		err = syscall.EINVAL
	}
	if err == nil {
		return out
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return Output{Errno: errno}
	}
	return Output{Unknown: true}
}

// writeAt0 writes data over the start of the file at p: one commit, at
// its close.
func writeAt0(ctx context.Context, c *client.Client, p, data string) error {
	f, err := c.OpenFile(ctx, p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(data), 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readAll(ctx context.Context, c *client.Client, p string) (string, error) {
	f, err := c.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}
