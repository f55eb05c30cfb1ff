package engine

import (
	"errors"
	"fmt"
)

// The intents of renames across partitions travel in the checkpoint as an
// optional last section, written only while there are any, so that a
// partition with none writes the bytes it wrote before they existed:
// xintentsMagic, the number of intents, then each in id order: id (16
// bytes), role, state, peer, parent, name, flags, ino, time, and 1 and the
// image for a committed source intent (0 otherwise). An image is its
// inode number at the source (from version 2 on: the target keeps it as
// an alias, forward.go), mode, uid, gid, size, rdev, three times, symlink
// target, xattrs (count,
// then name and value each) and chunks (count, then index, the number of
// slices and each slice's id, size, off, len, pos); a directory's image
// then has its entries (count, then each one's name and image).
const xintentsMagic = "CNPYXI02"

// xintentsMagic01 marks the section as written before images carried
// their inode numbers; it is read still.
const xintentsMagic01 = "CNPYXI01"

// maxCkptImageChunks bounds the chunks of one image read from a checkpoint.
const maxCkptImageChunks = 1 << 24

func (enc *encoder) intents(list []*Intent) {
	if len(list) == 0 {
		return
	}
	enc.raw([]byte(xintentsMagic))
	enc.uint(uint64(len(list)))
	for _, in := range list {
		enc.raw(in.ID[:])
		enc.uint(uint64(in.Role))
		enc.uint(uint64(in.State))
		enc.uint(uint64(in.Peer))
		enc.uint(uint64(in.Parent))
		enc.str(in.Name)
		enc.uint(uint64(in.Flags))
		enc.uint(uint64(in.Ino))
		enc.int(in.At)
		if in.Image == nil {
			enc.uint(0)
			continue
		}
		enc.uint(1)
		enc.image(in.Image)
	}
}

func (enc *encoder) image(img *XNode) {
	a := &img.Attr
	enc.uint(uint64(a.Ino))
	for _, v := range []uint64{uint64(a.Mode), uint64(a.UID), uint64(a.GID), a.Size, uint64(a.Rdev)} {
		enc.uint(v)
	}
	enc.int(a.Atime)
	enc.int(a.Mtime)
	enc.int(a.Ctime)
	enc.str(img.Target)
	enc.uint(uint64(len(img.Xattrs)))
	for _, x := range img.Xattrs {
		enc.str(x.Name)
		enc.str(string(x.Value))
	}
	enc.uint(uint64(len(img.Chunks)))
	for _, ch := range img.Chunks {
		enc.uint(uint64(ch.Index))
		enc.uint(uint64(len(ch.Slices)))
		for _, s := range ch.Slices {
			enc.uint(s.ID)
			enc.uint(uint64(s.Size))
			enc.uint(uint64(s.Off))
			enc.uint(uint64(s.Len))
			enc.uint(uint64(s.Pos))
		}
	}
	if img.isDir() {
		enc.uint(uint64(len(img.Entries)))
		for _, ent := range img.Entries {
			enc.str(ent.Name)
			enc.image(ent.Node)
		}
	}
}

// readIntents reads the intents section, if the checkpoint has one.
// readIntents reads the intents section of the current version; its
// magic has been read (readSections).
func (d *decoder) readIntents(e *Engine) { d.readIntentsOf(e, true) }

// readIntents01 reads an intents section of version 1.
func (d *decoder) readIntents01(e *Engine) { d.readIntentsOf(e, false) }

// readIntentsOf reads an intents section whose images carry their inode
// numbers if withIno.
func (d *decoder) readIntentsOf(e *Engine, withIno bool) {
	n := d.uint()
	if d.err == nil && (n == 0 || n > maxIntents) {
		d.err = fmt.Errorf("%d intents", n)
	}
	var list []*Intent
	for i := uint64(0); i < n && d.err == nil; i++ {
		in := &Intent{}
		copy(in.ID[:], d.bytes(XIDLen))
		in.Role = uint8(min(d.uint(), 255))
		in.State = uint8(min(d.uint(), 255))
		peer := d.uint()
		if d.err == nil && peer > 1<<PartitionBits-1 {
			d.err = fmt.Errorf("intent peer %d", peer)
		}
		in.Peer = uint16(peer)
		in.Parent = Ino(d.uint())
		in.Name = d.str(MaxNameLen)
		in.Flags = d.uint32()
		in.Ino = Ino(d.uint())
		in.At = d.int()
		switch d.uint() {
		case 0:
		case 1:
			in.Image = d.image(withIno)
		default:
			if d.err == nil {
				d.err = errors.New("intent image flag")
			}
		}
		list = append(list, in)
	}
	if d.err == nil {
		e.xr.list = list
		e.repin()
	}
}

// image reads an image and checks it (checkImage).
func (d *decoder) image(withIno bool) *XNode {
	img := d.imageTree(0, withIno)
	if d.err == nil {
		if err := checkImage(img); err != nil {
			d.err = err
		}
	}
	return img
}

// imageTree reads an image depth directories below the top one.
func (d *decoder) imageTree(depth int, withIno bool) *XNode {
	img := &XNode{}
	a := &img.Attr
	if withIno {
		a.Ino = Ino(d.uint())
	}
	a.Mode, a.UID, a.GID, a.Size, a.Rdev = d.uint32(), d.uint32(), d.uint32(), d.uint(), d.uint32()
	a.Atime, a.Mtime, a.Ctime = d.int(), d.int(), d.int()
	img.Target = d.str(MaxPathLen)
	nx := d.uint()
	if d.err == nil && nx > 1<<16 {
		d.err = fmt.Errorf("image of %d xattrs", nx)
	}
	for i := uint64(0); i < nx && d.err == nil; i++ {
		img.Xattrs = append(img.Xattrs, XXattr{Name: d.str(MaxXattrName), Value: []byte(d.str(MaxXattrSize))})
	}
	nc := d.uint()
	if d.err == nil && nc > maxCkptImageChunks {
		d.err = fmt.Errorf("image of %d chunks", nc)
	}
	for i := uint64(0); i < nc && d.err == nil; i++ {
		ch := XChunk{Index: d.uint32()}
		ns := d.uint()
		if d.err == nil && (ns == 0 || ns > maxCkptSlices) {
			d.err = fmt.Errorf("image chunk %d: %d slices", ch.Index, ns)
		}
		for j := uint64(0); j < ns && d.err == nil; j++ {
			ch.Slices = append(ch.Slices, Slice{ID: d.uint(), Size: d.uint32(), Off: d.uint32(), Len: d.uint32(), Pos: d.uint32()})
		}
		img.Chunks = append(img.Chunks, ch)
	}
	if d.err != nil || !img.isDir() {
		return img
	}
	ne := d.uint()
	if d.err == nil && (ne > MaxMoveNodes || depth >= maxMoveDepth) {
		d.err = fmt.Errorf("directory image of %d entries at depth %d", ne, depth)
	}
	for i := uint64(0); i < ne && d.err == nil; i++ {
		name := d.str(MaxNameLen)
		img.Entries = append(img.Entries, XEntry{Name: name, Node: d.imageTree(depth+1, withIno)})
	}
	return img
}
