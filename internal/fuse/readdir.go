package fuse

import (
	"context"
	iofs "io/fs"
	"sort"
	"sync"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// A directory stream as the kernel sees it: "." at offset 1, ".." at 2,
// then the entries in the service's (name) order, entry i at offset 3+i.
// The kernel continues a listing by offset; the service by a name cursor.
// A handle keeps one page of entries and, for every page it fetched, the
// cursor that fetched it, so that any offset it handed out (telldir) can
// be continued from.

// dots is the number of entries before the directory's own: "." and "..".
const dots = 2

// dirHandle is an open directory. The kernel reads one handle from one
// goroutine at a time, but mu guards it anyway.
type dirHandle struct {
	mu     sync.Mutex
	ino    client.Ino
	c      *client.Client // the opener's identity
	page   []*client.DirEntry
	base   uint64            // index of page[0] among the entries
	next   string            // cursor after page
	eof    bool              // page is the last
	starts map[uint64]string // index of a page's first entry -> cursor that fetched it
}

// load fetches the page starting at entry index from cursor.
func (d *dirHandle) load(ctx context.Context, index uint64, cursor string) error {
	page, next, eof, err := d.c.ReadDirIno(ctx, d.ino, cursor, 0, true)
	if err != nil {
		return err
	}
	d.page, d.base, d.next, d.eof = page, index, next, eof || len(page) == 0
	d.starts[index] = cursor
	return nil
}

// entry returns the entry at index, fetching pages as needed; nil at the
// end of the directory. It only moves forward from the page it seeks to,
// so it ends even when the directory changed under the listing.
func (d *dirHandle) entry(ctx context.Context, index uint64) (*client.DirEntry, error) {
	if index < d.base {
		// A seek back: continue from the last page that starts at or
		// before index.
		start, cursor := d.pageBefore(index)
		if err := d.load(ctx, start, cursor); err != nil {
			return nil, err
		}
	}
	for {
		end := d.base + uint64(len(d.page))
		if index < end {
			return d.page[index-d.base], nil
		}
		if d.eof {
			return nil, nil
		}
		if err := d.load(ctx, end, d.next); err != nil {
			return nil, err
		}
	}
}

// pageBefore returns the start and cursor of the last page fetched that
// starts at or before index.
func (d *dirHandle) pageBefore(index uint64) (uint64, string) {
	starts := make([]uint64, 0, len(d.starts))
	for s := range d.starts {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	best := uint64(0)
	for _, s := range starts {
		if s <= index {
			best = s
		}
	}
	return best, d.starts[best]
}

// OpenDir opens a directory and reads its first page, so that a caller
// who may not list it learns so from opendir.
func (fs *FS) OpenDir(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) (st gofuse.Status) {
	defer fs.observe(opOpendir, time.Now(), &st)
	ctx, c := fs.asWhole(&in.Caller)
	d := &dirHandle{ino: client.Ino(in.NodeId), c: c, starts: make(map[uint64]string)}
	if err := d.load(ctx, 0, ""); err != nil {
		return fs.fail(opOpendir, err)
	}
	out.Fh = fs.dirs.add(d)
	return gofuse.OK
}

// ReleaseDir closes a directory.
func (fs *FS) ReleaseDir(in *gofuse.ReleaseIn) {
	if d, ok := fs.dirs.remove(in.Fh); ok && in.ReleaseFlags&gofuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
		fs.releaseLocks(d.ino, in.LockOwner, true)
	}
}

// ReadDir lists entries from in.Offset.
func (fs *FS) ReadDir(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) (st gofuse.Status) {
	defer fs.observe(opReaddir, time.Now(), &st)
	return fs.readdir(cancel, in, out, false)
}

// ReadDirPlus lists entries from in.Offset with their attributes, so that
// `ls -l` needs no LOOKUP per entry.
func (fs *FS) ReadDirPlus(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) (st gofuse.Status) {
	defer fs.observe(opReaddirplus, time.Now(), &st)
	return fs.readdir(cancel, in, out, true)
}

func (fs *FS) readdir(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList, plus bool) gofuse.Status {
	d, ok := fs.dirs.get(in.Fh)
	if !ok {
		return gofuse.EBADF
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx := &gofuse.Context{Caller: in.Caller, Cancel: cancel}
	add := func(e gofuse.DirEntry) (*gofuse.EntryOut, bool) {
		if plus {
			eo := out.AddDirLookupEntry(e)
			return eo, eo != nil
		}
		return nil, out.AddDirEntry(e)
	}
	off := in.Offset
	for off < dots {
		name, ino := ".", uint64(d.ino)
		if off == 1 {
			name, ino = "..", 0
		}
		if _, ok := add(gofuse.DirEntry{Name: name, Ino: ino, Mode: syscall.S_IFDIR, Off: off + 1}); !ok {
			return gofuse.OK
		}
		off++
	}
	added := false
	for {
		e, err := d.entry(ctx, off-dots)
		if err != nil {
			if added {
				return gofuse.OK // the kernel asks again from where it stopped
			}
			return fs.fail(opReaddir, err)
		}
		if e == nil {
			return gofuse.OK
		}
		de := gofuse.DirEntry{Name: e.Name(), Ino: uint64(e.Ino()), Mode: uint32(typeBits(e)), Off: off + 1}
		eo, ok := add(de)
		if !ok {
			return gofuse.OK
		}
		if eo != nil {
			if info, err := e.Info(); err == nil {
				fs.fillEntry(eo, fs.withOpen(*info.Sys().(*client.Attr)))
			}
		}
		added = true
		off++
	}
}

// typeBits are the S_IFMT bits of an entry.
func typeBits(e *client.DirEntry) uint32 {
	if info, err := e.Info(); err == nil {
		return info.Sys().(*client.Attr).Mode & syscall.S_IFMT
	}
	switch m := e.Type(); {
	case m&iofs.ModeDir != 0:
		return syscall.S_IFDIR
	case m&iofs.ModeSymlink != 0:
		return syscall.S_IFLNK
	case m&iofs.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case m&iofs.ModeSocket != 0:
		return syscall.S_IFSOCK
	case m&iofs.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case m&iofs.ModeDevice != 0:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}
