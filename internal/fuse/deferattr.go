package fuse

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// A new file's chmod, chown and utimes, held back until its close (docs/
// fuse.md, "A new file's attributes, held until its close"). tar, cp -p
// and install create a file, write it, then fchown, fchmod and futimens
// it, and close it: four calls to the service after the create, each a
// round trip the program waits for. While a file this mount created is
// open only through the handle that created it, the mount answers those
// SETATTRs itself, with the attributes the service will give the file,
// and sends them with the commit at close(2) in one call
// (COMMIT_SETATTR): the data and the attributes land together, both or
// neither.
//
// The mount answers only what it knows the service would: the caller is
// the file's creator (same uid, gid and groups), and is root, or the
// owner changing the mode or setting explicit times (a chown by anyone
// but root, a change of the size, times set to "now", and a caller other
// than the creator go to the service as before, after what is held back).
// Other clients see the attributes at the close, as they see the data.
// Every call of the mount that changes the namespace or commits a file
// sends every held change first (sendAllHeld), so that the service's log
// keeps the order of the program's changes; an open, an extended
// attribute read and a write of the file send its own (sendHeld). Strict
// durability holds nothing back: there every change is answered once
// durable.

// heldAttrs are the attribute changes a handle holds back, and the
// attributes the file will have once they land. Any request goroutine may
// touch them, under mu, which a send holds until the service answered
// (sendHeldOf); mu is taken before the client.File's own lock, never
// after.
type heldAttrs struct {
	mu   sync.Mutex
	cred client.Cred // the creator, as whom the changes go
	attr client.Attr // as created, with the changes held back applied
	s    client.SetAttr
	// closed is set at the first close(2) of the file (FLUSH): from then
	// on nothing more is held back. The kernel's RELEASE comes later, and
	// a chmod after close(2) must reach the service before it returns.
	closed bool
}

// heldTotal counts handles holding changes back, so that the calls that
// must send every held change first skip the walk when there are none.
type heldTotal struct{ n atomic.Int64 }

// holdable are the SETATTR changes a handle may hold back.
const holdable = client.SetMode | client.SetUID | client.SetGID | client.SetAtime | client.SetMtime

// hold holds back change s made by caller on h's file and returns the
// attributes the file will have, or false if the change must go to the
// service now (the caller first sends what h holds: sendHeld).
func (fs *FS) hold(h *fileHandle, cred client.Cred, s client.SetAttr) (client.Attr, bool) {
	if h.held == nil || s.Valid == 0 || s.Valid&^holdable != 0 {
		return client.Attr{}, false
	}
	hs := fs.open.of(h.ino)
	if len(hs) != 1 || hs[0] != h {
		return client.Attr{}, false
	}
	held := h.held
	held.mu.Lock()
	defer held.mu.Unlock()
	if held.closed || !sameCred(held.cred, cred) || !predictable(cred, held.attr, s) {
		return client.Attr{}, false
	}
	a := &held.attr
	if s.Valid&(client.SetUID|client.SetGID) != 0 {
		if s.Valid&client.SetUID != 0 {
			a.UID = s.UID
		}
		if s.Valid&client.SetGID != 0 {
			a.GID = s.GID
		}
		// A chown clears set-user-ID, and set-group-ID where it means
		// "run with the group" (group execute set): the engine's rule for
		// root, the only one who gets here with a chown. A mode held back
		// from before the chown is cleared the same way, since the service
		// applies the owner before the mode.
		a.Mode = killSetIDAsRoot(a.Mode)
		if held.s.Valid&client.SetMode != 0 {
			held.s.Mode = killSetIDAsRoot(held.s.Mode) & 0o7777
		}
	}
	if s.Valid&client.SetMode != 0 {
		mode := s.Mode & 0o7777
		if cred.UID != 0 && !inGroup(cred, a.GID) {
			mode &^= sISGID
		}
		a.Mode = a.Mode&^0o7777 | mode
	}
	if s.Valid&client.SetAtime != 0 {
		a.Atime = time.Unix(0, s.Atime)
	}
	if s.Valid&client.SetMtime != 0 {
		a.Mtime = time.Unix(0, s.Mtime)
	}
	a.Ctime = time.Now()
	if held.s.Valid == 0 {
		fs.held.n.Add(1)
	}
	held.s = mergeSetAttr(held.s, s)
	out := *a
	// The size is the writer's: the held attributes are those of the
	// create, and the writes since may be committed already.
	if size, ok := h.f.WriterSize(); ok {
		out.Size = size
	}
	return out, true
}

// Mode bits the rules above read.
const (
	sISUID = 0o4000
	sISGID = 0o2000
)

// predictable reports whether the mount knows the service's answer to s
// from cred on a file with attributes a: yes for root, and for the owner
// changing the mode or explicit times.
func predictable(cred client.Cred, a client.Attr, s client.SetAttr) bool {
	if cred.UID == 0 {
		return true
	}
	return cred.UID == a.UID && s.Valid&(client.SetUID|client.SetGID) == 0
}

// killSetIDAsRoot is what a chown by root does to a regular file's mode.
func killSetIDAsRoot(mode uint32) uint32 {
	mode &^= sISUID
	if mode&0o010 != 0 {
		mode &^= sISGID
	}
	return mode
}

// mergeSetAttr returns the one change that does what held and then s do:
// the later value of each attribute wins.
func mergeSetAttr(held, s client.SetAttr) client.SetAttr {
	if s.Valid&client.SetMode != 0 {
		held.Mode = s.Mode & 0o7777
	}
	if s.Valid&client.SetUID != 0 {
		held.UID = s.UID
	}
	if s.Valid&client.SetGID != 0 {
		held.GID = s.GID
	}
	if s.Valid&client.SetAtime != 0 {
		held.Atime = s.Atime
	}
	if s.Valid&client.SetMtime != 0 {
		held.Mtime = s.Mtime
	}
	held.Valid |= s.Valid
	return held
}

func sameCred(a, b client.Cred) bool {
	return a.UID == b.UID && a.GID == b.GID && slices.Equal(a.Groups, b.Groups)
}

// withHeld returns a with the changes h's file holds back applied.
func (h *fileHandle) withHeld(a client.Attr) client.Attr {
	if h.held == nil {
		return a
	}
	h.held.mu.Lock()
	defer h.held.mu.Unlock()
	if h.held.s.Valid == 0 {
		return a
	}
	p := h.held.attr
	a.Mode, a.UID, a.GID = p.Mode, p.UID, p.GID
	if h.held.s.Valid&client.SetAtime != 0 {
		a.Atime = p.Atime
	}
	if h.held.s.Valid&client.SetMtime != 0 {
		a.Mtime = p.Mtime
	}
	a.Ctime = p.Ctime
	return a
}

// stopHolding makes h hold nothing back from now on (its file was closed
// once: close(2)).
func (h *fileHandle) stopHolding() {
	if h.held == nil {
		return
	}
	h.held.mu.Lock()
	h.held.closed = true
	h.held.mu.Unlock()
}

// holds reports whether h holds changes back.
func (h *fileHandle) holds() bool {
	if h.held == nil {
		return false
	}
	h.held.mu.Lock()
	defer h.held.mu.Unlock()
	return h.held.s.Valid != 0
}

// takeHeld returns the changes h holds back and forgets them (a release
// drops what it could not send).
func (fs *FS) takeHeld(h *fileHandle) (client.SetAttr, bool) {
	if h.held == nil {
		return client.SetAttr{}, false
	}
	h.held.mu.Lock()
	defer h.held.mu.Unlock()
	s := h.held.s
	if s.Valid == 0 {
		return s, false
	}
	h.held.s = client.SetAttr{}
	fs.held.n.Add(-1)
	return s, true
}

// sendHeldOf sends what h holds back, with its buffered writes, in one
// call, and reports whether it held anything. h.held.mu is held
// throughout, so that the handle's release, which sends what is held
// before it closes the file, waits for a send of another goroutine in
// progress rather than close the file under it. What fails to go stays
// held, for the next flush or the release to try (or report) again.
func (fs *FS) sendHeldOf(h *fileHandle) (bool, error) {
	if h.held == nil {
		return false, nil
	}
	h.held.mu.Lock()
	defer h.held.mu.Unlock()
	s := h.held.s
	if s.Valid == 0 {
		return false, nil
	}
	if err := h.f.CommitSetAttr(s); err != nil {
		return true, err
	}
	h.held.s = client.SetAttr{}
	fs.held.n.Add(-1)
	return true, nil
}

// commitHeld commits h's buffered writes, with the changes it holds back
// in the same call; without any, it is a plain commit.
func (fs *FS) commitHeld(h *fileHandle) error {
	if sent, err := fs.sendHeldOf(h); sent || err != nil {
		return err
	}
	return h.f.Commit()
}

// sendHeld sends what the handles open on ino hold back, so that a call
// about ino that follows sees it.
func (fs *FS) sendHeld(ino client.Ino) gofuse.Status {
	if fs.held.n.Load() == 0 {
		return gofuse.OK
	}
	for _, h := range fs.open.of(ino) {
		sent, err := fs.sendHeldOf(h)
		if err != nil {
			return fs.fail(opSetattr, err)
		}
		if sent {
			fs.afterCommit(h)
		}
	}
	return gofuse.OK
}

// sendAllHeld sends what every open handle holds back, before a call whose
// checks may read the owner of a file it names only by its name.
func (fs *FS) sendAllHeld() gofuse.Status {
	if fs.held.n.Load() == 0 {
		return gofuse.OK
	}
	for _, ino := range fs.open.inos() {
		if st := fs.sendHeld(ino); st != gofuse.OK {
			return st
		}
	}
	return gofuse.OK
}
