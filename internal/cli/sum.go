package cli

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
)

// `canopy sum PATH` is a checksum of a tree: of every path below PATH, the
// node's type, permission bits, owner, group, size, modification time,
// device number, symlink target, extended attributes, contents, and
// which paths are hard links of one another. Inode numbers, access and
// change times are left out, so two trees with equal sums hold the same
// files whatever server they are on: it is how a dump and a load are
// checked against each other.

// treeSum is the result of `canopy sum`, also its JSON form.
type treeSum struct {
	Path     string `json:"path"`
	Sum      string `json:"sum"` // hex sha256
	Dirs     uint64 `json:"dirs"`
	Files    uint64 `json:"files"`
	Symlinks uint64 `json:"symlinks"`
	Others   uint64 `json:"others"`    // device nodes, fifos, sockets
	Links    uint64 `json:"hardlinks"` // paths that name a node already counted
	Xattrs   uint64 `json:"xattrs"`
	Bytes    uint64 `json:"bytes"` // contents of regular files, each node once
}

// summer walks a tree and feeds a sha256. The goroutine that calls sum
// owns it.
type summer struct {
	c     *client.Client
	h     hash.Hash
	res   treeSum
	seen  map[client.Ino]string // first path of each node with several links
	num   [binary.MaxVarintLen64]byte
	chunk []byte
}

func newTreeSum(ctx context.Context, c *client.Client, root string) (treeSum, error) {
	s := &summer{c: c, h: sha256.New(), seen: make(map[client.Ino]string), chunk: make([]byte, copyBuf)}
	fi, err := c.Lstat(ctx, root)
	if err != nil {
		return treeSum{}, err
	}
	if err := s.node(ctx, root, ".", fi.Attr()); err != nil {
		return treeSum{}, err
	}
	s.res.Path = root
	s.res.Sum = hex.EncodeToString(s.h.Sum(nil))
	return s.res, nil
}

func (s *summer) uint(v uint64) {
	s.h.Write(s.num[:binary.PutUvarint(s.num[:], v)])
}

func (s *summer) bytes(b []byte) {
	s.uint(uint64(len(b)))
	s.h.Write(b)
}

func (s *summer) str(v string) { s.bytes([]byte(v)) }

// node hashes the node at p (named rel relative to the root) with
// attributes a, and below it if it is a directory.
func (s *summer) node(ctx context.Context, p, rel string, a client.Attr) error {
	s.str(rel)
	typ := a.Mode & syscall.S_IFMT
	if typ != syscall.S_IFDIR && a.Nlink > 1 {
		if first, ok := s.seen[a.Ino]; ok {
			s.res.Links++
			s.str("link")
			s.str(first)
			return nil
		}
		s.seen[a.Ino] = rel
	}
	s.str("node")
	s.uint(uint64(a.Mode))
	s.uint(uint64(a.UID))
	s.uint(uint64(a.GID))
	s.uint(uint64(a.Rdev))
	s.uint(uint64(a.Mtime.UnixNano()))
	if typ != syscall.S_IFDIR {
		s.uint(uint64(a.Nlink))
		s.uint(a.Size)
	}
	names, err := s.c.ListXattrIno(ctx, a.Ino) // by inode: a path would follow a symlink
	if err != nil {
		return fmt.Errorf("sum: xattrs of %s: %w", p, err)
	}
	// The system's own records on a partition's root change with every
	// pass of the collector, not with the tree.
	names = slices.DeleteFunc(names, protocol.IsRecordXattr)
	slices.Sort(names)
	s.uint(uint64(len(names)))
	for _, n := range names {
		v, err := s.c.GetXattrIno(ctx, a.Ino, n)
		if err != nil {
			return fmt.Errorf("sum: xattr %s of %s: %w", n, p, err)
		}
		s.str(n)
		s.bytes(v)
		s.res.Xattrs++
	}
	switch typ {
	case syscall.S_IFDIR:
		s.res.Dirs++
		return s.dir(ctx, p, rel)
	case syscall.S_IFLNK:
		s.res.Symlinks++
		target, err := s.c.Readlink(ctx, p)
		if err != nil {
			return fmt.Errorf("sum: %w", err)
		}
		s.str(target)
	case syscall.S_IFREG:
		s.res.Files++
		s.res.Bytes += a.Size
		return s.contents(ctx, p, a.Size)
	default:
		s.res.Others++
	}
	return nil
}

// contents hashes the size bytes of regular file p.
func (s *summer) contents(ctx context.Context, p string, size uint64) error {
	if size == 0 {
		return nil
	}
	f, err := s.c.Open(ctx, p)
	if err != nil {
		return fmt.Errorf("sum: %w", err)
	}
	defer f.Close()
	n, err := io.CopyBuffer(s.h, io.LimitReader(f, int64(size)), s.chunk)
	if err != nil {
		return fmt.Errorf("sum: read %s: %w", p, err)
	}
	if uint64(n) != size {
		return fmt.Errorf("sum: read %s: %d bytes of %d", p, n, size)
	}
	return nil
}

// dir hashes the entries of directory p in name order.
func (s *summer) dir(ctx context.Context, p, rel string) error {
	ents, err := s.c.ReadDir(ctx, p)
	if err != nil {
		return fmt.Errorf("sum: %w", err)
	}
	slices.SortFunc(ents, func(a, b *client.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	s.uint(uint64(len(ents)))
	for _, e := range ents {
		child := path.Join(p, e.Name())
		var a client.Attr
		if info, err := e.Info(); err == nil {
			a = *info.Sys().(*client.Attr) // the listing asked for attributes
		} else {
			fi, err := s.c.Lstat(ctx, child)
			if err != nil {
				return fmt.Errorf("sum: %w", err)
			}
			a = fi.Attr()
		}
		if err := s.node(ctx, child, path.Join(rel, e.Name()), a); err != nil {
			return err
		}
	}
	return nil
}

func newSumCmd(g *globals) *cobra.Command {
	var f dataFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sum [PATH]",
		Short: "Print a checksum of a tree: paths, attributes, xattrs, links and contents",
		Long: "Print a checksum of the tree at PATH (default /): every path below it, each node's type,\n" +
			"permissions, owner, group, size, modification time, symlink target, extended attributes\n" +
			"and contents, and which paths are hard links of one another. Inode numbers, access and\n" +
			"change times are left out, and so are the system's own records (trusted.canopy.*, the\n" +
			"collector's and fsck's last runs): two trees with the same sum hold the same files.",
		Example: "  canopy sum /\n  canopy sum --json /data",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			root := "/"
			if len(args) == 1 {
				root = canon(args[0])
			}
			return g.runData(&f, func(ctx context.Context, c *client.Client) error {
				res, err := newTreeSum(ctx, c, root)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(g.out).Encode(res)
				}
				fmt.Fprintf(g.out, "%s  %s\n", res.Sum, res.Path)
				fmt.Fprintf(g.out, "%d directories, %d files, %d symlinks, %d others, %d hard links, %d xattrs, %d bytes\n",
					res.Dirs, res.Files, res.Symlinks, res.Others, res.Links, res.Xattrs, res.Bytes)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.bind(cmd, false)
	return cmd
}
