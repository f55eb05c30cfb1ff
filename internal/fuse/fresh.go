package fuse

import (
	"sync"
	"time"

	"github.com/canopyfs/canopy/client"
)

// Fresh directories: a directory this mount made moments ago holds, as far
// as the mount can know, only the names made in it through the mount
// since. Before a program creates a file the kernel looks its name up,
// and in a directory being filled (tar, git, cp -r) every such LOOKUP is a
// round trip to the service that answers ENOENT. For EntryTimeout after
// its MKDIR the mount answers those itself: a name made in the directory
// through the mount, or on its way to being made, goes to the service;
// any other is absent. A name another client makes in the directory in
// that time may be seen here up to EntryTimeout late, the same staleness
// the kernel's cached entries already have; with EntryTimeout 0 nothing
// is answered here. A create that finds the name taken after all opens
// the file there, as open(2) without O_EXCL does (FS.Create).

const (
	// maxFreshDirs bounds the directories followed at once; past it,
	// new ones are not followed until expired ones are swept.
	maxFreshDirs = 4096
	// maxFreshNames bounds the names kept for one directory; past it,
	// the directory is no longer followed.
	maxFreshNames = 16384
)

// freshDirs is the set of directories this mount made and still follows.
// Any FUSE goroutine may call its methods.
type freshDirs struct {
	window time.Duration // how long a directory stays fresh; 0: none does

	mu   sync.Mutex
	dirs map[client.Ino]*freshDir
}

// freshDir is one directory followed: until when, and the names made in it
// through the mount since its MKDIR.
type freshDir struct {
	until time.Time
	names map[string]struct{}
}

// made starts following dir, which this mount has just made empty.
func (f *freshDirs) made(dir client.Ino) {
	if f.window <= 0 {
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs == nil {
		f.dirs = make(map[client.Ino]*freshDir)
	}
	if len(f.dirs) >= maxFreshDirs {
		for ino, d := range f.dirs {
			if !now.Before(d.until) {
				delete(f.dirs, ino)
			}
		}
		if len(f.dirs) >= maxFreshDirs {
			return
		}
	}
	f.dirs[dir] = &freshDir{until: now.Add(f.window), names: make(map[string]struct{})}
}

// naming records that name in dir is being made (or replaced, or exchanged)
// through the mount. It is called before the call that makes it, so that
// no LOOKUP answered here can miss it whatever the call's outcome.
func (f *freshDirs) naming(dir client.Ino, name string) {
	if f.window <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.dirs[dir]
	if !ok {
		return
	}
	if len(d.names) >= maxFreshNames {
		delete(f.dirs, dir)
		return
	}
	d.names[name] = struct{}{}
}

// absent reports whether name is known to be absent from dir: dir is
// fresh and name was not made in it through the mount.
func (f *freshDirs) absent(dir client.Ino, name string) bool {
	if f.window <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.dirs[dir]
	if !ok {
		return false
	}
	if !time.Now().Before(d.until) {
		delete(f.dirs, dir)
		return false
	}
	_, named := d.names[name]
	return !named
}
