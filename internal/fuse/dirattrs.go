package fuse

import (
	"sync"
	"time"

	"github.com/canopyfs/canopy/client"
)

// After a create the kernel drops the directory's attributes (its mtime
// and ctime changed) and asks for them again before it checks the next
// call in that directory: one GETATTR per new file. CREATE_OPEN answers
// with the directory's attributes as the create left them, and dirAttrs
// keeps them to answer that GETATTR, once, without asking the service.
//
// It answers only what the service would, as far as this mount can know:
// a create keeps the directory's attributes only if no other create or
// directory change (mkdir, unlink, rename, ...) through the mount began
// or ended while it ran, and no change of that directory's own
// attributes (chmod, utimes, xattrs) overlapped it; a directory change
// forgets everything kept, a change of a node's attributes what is kept
// for that node. Changes made elsewhere are seen after at most the
// attribute timeout, as with the kernel's own cache.
//
// Shared by the request goroutines; guarded by mu.
type dirAttrs struct {
	ttl time.Duration

	mu      sync.Mutex
	epoch   uint64 // creates and directory changes begun or ended
	m       map[client.Ino]keptAttr
	creates int                     // creates in flight
	busy    map[client.Ino]int      // node changes in flight, by node
	touched map[client.Ino]struct{} // nodes changed while a create was in flight
	spilled bool                    // touched outgrew its bound: keep nothing until no create is in flight
}

type keptAttr struct {
	a  client.Attr
	at time.Time
}

// maxKeptDirs bounds the directories kept and the nodes remembered as
// touched.
const maxKeptDirs = 1024

// beginCreate is called as a create starts; it returns the epoch to hand
// to created.
func (d *dirAttrs) beginCreate() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.creates++
	d.epoch++
	return d.epoch
}

// created ends a create that began at epoch in directory dir; a is the
// directory's attributes after it, or nil if there are none to keep (the
// create failed or the service sent none).
func (d *dirAttrs) created(began uint64, dir client.Ino, a *client.Attr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, touched := d.touched[dir]
	keep := a != nil && a.Ino == dir && d.ttl > 0 && d.epoch == began && d.busy[dir] == 0 && !touched && !d.spilled
	d.epoch++
	d.creates--
	if d.creates == 0 {
		clear(d.touched)
		d.spilled = false
	}
	if !keep {
		delete(d.m, dir)
		return
	}
	if d.m == nil || len(d.m) >= maxKeptDirs {
		d.m = make(map[client.Ino]keptAttr)
	}
	d.m[dir] = keptAttr{a: *a, at: time.Now()}
}

// dirChange is called as a directory change begins and as it ends:
// whatever is kept may be stale.
func (d *dirAttrs) dirChange() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch++
	clear(d.m)
}

// beginNode and endNode bracket a change of node ino's own attributes.
func (d *dirAttrs) beginNode(ino client.Ino) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy == nil {
		d.busy = make(map[client.Ino]int)
	}
	d.busy[ino]++
	delete(d.m, ino)
}

func (d *dirAttrs) endNode(ino client.Ino) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[ino] <= 1 {
		delete(d.busy, ino)
	} else {
		d.busy[ino]--
	}
	delete(d.m, ino)
	if d.creates > 0 {
		if d.touched == nil {
			d.touched = make(map[client.Ino]struct{})
		}
		if len(d.touched) >= maxKeptDirs {
			d.spilled = true
		} else {
			d.touched[ino] = struct{}{}
		}
	}
}

// take returns the kept attributes of dir and forgets them, if they are
// younger than the attribute timeout.
func (d *dirAttrs) take(dir client.Ino) (client.Attr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.m[dir]
	if !ok {
		return client.Attr{}, false
	}
	delete(d.m, dir)
	if time.Since(k.at) >= d.ttl {
		return client.Attr{}, false
	}
	return k.a, true
}

// changing marks a handler that changes directories (other than a
// create); use it as defer fs.changing()().
func (fs *FS) changing() func() {
	fs.dirAttrs.dirChange()
	return fs.dirAttrs.dirChange
}

// changingNode marks a handler that changes node ino's own attributes;
// use it as defer fs.changingNode(ino)().
func (fs *FS) changingNode(ino client.Ino) func() {
	fs.dirAttrs.beginNode(ino)
	return func() { fs.dirAttrs.endNode(ino) }
}
