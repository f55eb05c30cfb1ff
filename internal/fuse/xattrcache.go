package fuse

import (
	"sync"
	"time"

	"github.com/canopyfs/canopy/client"
)

// capabilityXattr is the attribute the kernel reads before every write to
// a file (to learn whether the write must remove file capabilities): one
// GETXATTR per write call, answered ENODATA for nearly every file.
const capabilityXattr = "security.capability"

// maxNoCaps bounds the negative cache; past it, expired entries are swept
// and, if that is not enough, the cache starts over.
const maxNoCaps = 1 << 16

// noCaps is a negative cache of security.capability: the inodes known, a
// moment ago, to have none. An inode enters it when this mount creates it
// (a new file has no capabilities) or when the service answers ENODATA
// for it, and stays for the attribute timeout, the same bound the
// kernel's own attribute cache has for changes made elsewhere; a SETXATTR
// or REMOVEXATTR through this mount takes it out at once. Shared by the
// request goroutines; guarded by mu.
type noCaps struct {
	ttl time.Duration

	mu sync.Mutex
	m  map[client.Ino]time.Time // inode -> when the entry expires
}

// add records that ino has no capabilities now.
func (n *noCaps) add(ino client.Ino) {
	if n.ttl <= 0 {
		return
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = make(map[client.Ino]time.Time)
	}
	if len(n.m) >= maxNoCaps {
		for k, exp := range n.m {
			if !now.Before(exp) {
				delete(n.m, k)
			}
		}
		if len(n.m) >= maxNoCaps {
			clear(n.m)
		}
	}
	n.m[ino] = now.Add(n.ttl)
}

// has reports whether ino is known to have no capabilities.
func (n *noCaps) has(ino client.Ino) bool {
	if n.ttl <= 0 {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	exp, ok := n.m[ino]
	if ok && !time.Now().Before(exp) {
		delete(n.m, ino)
		return false
	}
	return ok
}

// drop forgets what is known of ino.
func (n *noCaps) drop(ino client.Ino) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, ino)
}
