package engine

// The image of a node moving between partitions (a rename across
// partitions, xrename.go): taken at the source, checked and made a node
// again at the target, and the inline bytes it carries along.

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"syscall"

	"github.com/canopyfs/canopy/internal/layout"
)

// ImageInline returns the bytes of img's slices this partition holds
// inline, to send along with the image.
func (e *Engine) ImageInline(img *XNode) []InlineSlice {
	if img == nil {
		return nil
	}
	return e.inlineOf(img.Chunks)
}

// imageOf returns the image of non-directory n.
func (e *Engine) imageOf(n *node) *XNode {
	img := &XNode{Attr: e.attr(n)}
	if x := e.st.extraOf(n); x != nil {
		img.Target = x.target
		for _, k := range slices.Sorted(maps.Keys(x.xattrs)) {
			img.Xattrs = append(img.Xattrs, XXattr{Name: k, Value: slices.Clone(x.xattrs[k])})
		}
	}
	for _, ch := range e.chunks(n) {
		img.Chunks = append(img.Chunks, XChunk{Index: ch.idx, Slices: slices.Clone(ch.slices)})
	}
	return img
}

// checkImage checks what an image arriving from another partition holds:
// a directory's with its subtree (checkTree).
func checkImage(img *XNode) error {
	if img.isDir() {
		count := 0
		return checkTree(img, 0, &count)
	}
	return checkNodeImage(img)
}

// checkXattrs checks an image's xattrs: named, within the limits, in name
// order.
func checkXattrs(xattrs []XXattr) error {
	for i, x := range xattrs {
		if x.Name == "" || len(x.Name) > MaxXattrName || len(x.Value) > MaxXattrSize ||
			i > 0 && xattrs[i-1].Name >= x.Name {
			return fmt.Errorf("image xattr %q: %w", x.Name, syscall.EINVAL)
		}
	}
	return nil
}

// checkNodeImage checks the image of a node that is not a directory.
func checkNodeImage(img *XNode) error {
	switch img.Attr.Mode & S_IFMT {
	case S_IFREG, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK:
	default:
		return fmt.Errorf("image of mode %o: %w", img.Attr.Mode, syscall.EINVAL)
	}
	if img.Attr.Mode&S_IFMT != S_IFREG && len(img.Chunks) > 0 || img.Attr.Size > MaxFileSize {
		return fmt.Errorf("image content: %w", syscall.EINVAL)
	}
	if (img.Target != "") != (img.Attr.Mode&S_IFMT == S_IFLNK) || len(img.Target) >= MaxPathLen {
		return fmt.Errorf("image symlink target: %w", syscall.EINVAL)
	}
	if len(img.Entries) > 0 {
		return fmt.Errorf("image of mode %o with entries: %w", img.Attr.Mode, syscall.EINVAL)
	}
	if err := checkXattrs(img.Xattrs); err != nil {
		return err
	}
	for i, ch := range img.Chunks {
		if len(ch.Slices) == 0 || i > 0 && img.Chunks[i-1].Index >= ch.Index {
			return fmt.Errorf("image chunk %d: %w", ch.Index, syscall.EINVAL)
		}
		for k, s := range ch.Slices {
			if s.ID == 0 || checkPlacement(s) != nil ||
				chunkStart(ch.Index)+uint64(s.Pos+s.Len) > img.Attr.Size {
				return fmt.Errorf("image chunk %d slice %d: %w", ch.Index, s.ID, syscall.EINVAL)
			}
			for _, t := range ch.Slices[:k] {
				if t.ID == s.ID {
					return fmt.Errorf("image chunk %d slice %d twice: %w", ch.Index, s.ID, syscall.EINVAL)
				}
			}
		}
		if view := resolve(ch.Slices, layout.ChunkSize); len(view) > 0 {
			for _, s := range ch.Slices {
				if !visible(view, s.ID) {
					return fmt.Errorf("image chunk %d slice %d covered: %w", ch.Index, s.ID, syscall.EINVAL)
				}
			}
		}
	}
	for i, in := range img.Inline {
		sized := false
		for _, ch := range img.Chunks {
			for _, s := range ch.Slices {
				sized = sized || s.ID == in.ID && int(s.Size) == len(in.Data)
			}
		}
		if !sized || len(in.Data) > MaxInlineSlice || i > 0 && img.Inline[i-1].ID >= in.ID {
			return fmt.Errorf("image inline slice %d: %w", in.ID, syscall.EINVAL)
		}
	}
	return nil
}

// arrive makes a node of this partition from image img, counted under the
// quotas over directory d, and returns its slot (not yet linked: the
// caller links it, once).
func (e *Engine) arrive(d *node, img *XNode, now int64) uint32 {
	slot, n := e.st.add(e.alloc())
	a := &img.Attr
	n.Mode, n.Nlink, n.Size = a.Mode, 1, a.Size
	e.setOwner(n, a.UID, a.GID)
	n.Atime, n.Mtime, n.Ctime = a.Atime, a.Mtime, now
	if a.Rdev != 0 && (a.Mode&S_IFMT == S_IFCHR || a.Mode&S_IFMT == S_IFBLK) {
		e.st.extra(n).rdev = a.Rdev
	}
	if img.Target != "" {
		e.st.extra(n).target = img.Target
	}
	if len(img.Xattrs) > 0 {
		x := e.st.extra(n)
		x.xattrs = make(map[string][]byte, len(img.Xattrs))
		for _, xa := range img.Xattrs {
			x.xattrs[xa.Name] = slices.Clone(xa.Value)
		}
	}
	if len(img.Chunks) > 0 {
		cs := make([]chunk, len(img.Chunks))
		for i, ch := range img.Chunks {
			cs[i] = chunk{idx: ch.Index, slices: slices.Clone(ch.Slices)}
		}
		e.setChunks(n, cs)
	}
	for _, in := range img.Inline {
		e.addInline(in.ID, bytes.Clone(in.Data))
	}
	if n.Mode&S_IFMT == S_IFREG {
		e.used += n.Size
	}
	if e.quota.dirs != nil {
		q := e.regionOf(d)
		if q != 0 {
			e.quotaAdd(q, 1, int64(bytesOf(n)))
			e.setRegion(n, q)
		}
	}
	e.ownerCreated(n)
	return slot
}

// depart frees non-directory n, whose one entry the caller removed or
// replaced, without dropping its slices: another partition holds them now.
func (e *Engine) depart(n *node) {
	if e.quota.dirs != nil || e.ownerQuotasOn() {
		e.quotaGone(n)
	}
	if n.Mode&S_IFMT == S_IFREG {
		e.used -= n.Size
	}
	e.setChunks(n, nil)
	n.Nlink = 0
	delete(e.orphans, n.Ino)
	delete(e.opens, n.Ino)
	e.st.remove(n.Ino)
}
