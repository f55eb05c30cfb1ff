package fuse

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// groupTTL is how long the supplementary groups read for a process are
// reused: long enough that a burst of calls from one process reads
// /proc once, short enough that a reused pid or a setgroups(2) is seen
// soon.
const groupTTL = time.Second

// maxCachedPids bounds the group cache; when it is full, expired entries
// are dropped, and if none are, everything is.
const maxCachedPids = 4096

// groupCache remembers the supplementary groups of calling processes,
// read from /proc/PID/status. It is shared by the request goroutines and
// guarded by mu.
type groupCache struct {
	mu   sync.Mutex
	m    map[uint32]groupEntry
	now  func() time.Time
	read func(pid uint32) ([]uint32, error)
}

type groupEntry struct {
	groups []uint32
	at     time.Time
}

func newGroupCache() *groupCache {
	return &groupCache{m: make(map[uint32]groupEntry), now: time.Now, read: readGroups}
}

// groups returns the supplementary groups of process pid; none for pid 0
// (a request the kernel makes on its own) or a process already gone.
func (g *groupCache) groups(pid uint32) []uint32 {
	if pid == 0 {
		return nil
	}
	now := g.now()
	g.mu.Lock()
	e, ok := g.m[pid]
	g.mu.Unlock()
	if ok && now.Sub(e.at) < groupTTL {
		return e.groups
	}
	groups, err := g.read(pid)
	if err != nil {
		return nil
	}
	g.mu.Lock()
	if len(g.m) >= maxCachedPids {
		for p, e := range g.m {
			if now.Sub(e.at) >= groupTTL {
				delete(g.m, p)
			}
		}
		if len(g.m) >= maxCachedPids {
			clear(g.m)
		}
	}
	g.m[pid] = groupEntry{groups: groups, at: now}
	g.mu.Unlock()
	return groups
}

// readGroups reads the "Groups:" line of /proc/PID/status.
func readGroups(pid uint32) ([]uint32, error) {
	data, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil, err
	}
	return parseGroups(data)
}

// parseGroups finds the "Groups:" line of a /proc/PID/status file and
// returns the numbers on it.
func parseGroups(status []byte) ([]uint32, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, []byte("Groups:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		groups := make([]uint32, 0, len(fields))
		for _, f := range fields {
			n, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("groups line %q: %w", line, err)
			}
			groups = append(groups, uint32(n))
		}
		return groups, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no Groups line in process status")
}

// credOf is the identity of the process that made a request: the uid and
// gid the kernel gives (effective ids; the real ones for ACCESS) and the
// process's supplementary groups.
func (fs *FS) credOf(c *gofuse.Caller) client.Cred {
	return client.Cred{UID: c.Uid, GID: c.Gid, Groups: fs.groups.groups(c.Pid)}
}
