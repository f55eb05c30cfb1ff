package server

import (
	"strings"
	"sync"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"golang.org/x/time/rate"
)

// Path-scoped credentials. A call under a credential whose Path is not
// "/" sees that subtree (its top) as the whole namespace. The apply loop
// confines the call before it runs (confine): it resolves every path of
// the request itself, from the top, component by component, with ".." at
// the top staying there and a symlink's absolute target starting at the
// top too, and rewrites the request to name inodes only; the root's inode
// stands for the top; any other inode must lie inside: a directory when
// its parent links lead to the top (engine.DirUnder), anything else when
// the client was shown it, by a reply to one of its confined calls
// (scopeGrants), or, for a node this server did not show it (after a
// failover or a restart), when the node has a link in a directory of the
// subtree (engine.LinkedUnder, a search bounded per call and per client). So nothing outside can be named, by path or inode,
// learned or guessed, and RENAME and LINK, whose two ends are both
// confined, cannot move a node out of the subtree or into it. Replies
// show the top as the root. The rewritten request is what the log
// records, so replay and followers need no credential.

// maxGrants bounds the nodes remembered per client; beyond it the set
// starts again (the client then gets EACCES for a file it was shown
// before, until it looks it up again).
const maxGrants = 1 << 20

// scopeGrants remembers, per client, the nodes its confined calls were
// shown. The apply loop adds and checks; the RPC readers check (lock
// calls, answered at intake) and drop a departed client's; mu guards the
// map.
type scopeGrants struct {
	mu       sync.Mutex
	byClient map[rpc.ClientID]*clientGrants
}

type clientGrants struct {
	cred     string // the credential the nodes were shown under
	inos     map[engine.Ino]struct{}
	searches *rate.Limiter // of the subtree searches for nodes not shown (search)
}

// Searches of the subtree, per client: a client may have this many a
// second, in bursts of searchBurst; each looks at searchBudget entries at
// most. Past either, a node not shown is refused (EACCES) and the client
// looks it up by path again.
const (
	searchRate   = 64
	searchBurst  = 1024
	searchBudget = 1 << 20
)

// maySearch takes one of client's subtree searches, if it has one left.
func (g *scopeGrants) maySearch(client rpc.ClientID, cred string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	cg := g.byClient[client]
	if cg == nil || cg.cred != cred {
		cg = &clientGrants{cred: cred, inos: make(map[engine.Ino]struct{})}
		g.byClient[client] = cg
	}
	if cg.searches == nil {
		cg.searches = rate.NewLimiter(searchRate, searchBurst)
	}
	return cg.searches.Allow()
}

func newScopeGrants() *scopeGrants {
	return &scopeGrants{byClient: make(map[rpc.ClientID]*clientGrants)}
}

func (g *scopeGrants) add(client rpc.ClientID, cred string, inos ...engine.Ino) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cg := g.byClient[client]
	if cg == nil || cg.cred != cred || len(cg.inos) >= maxGrants {
		fresh := &clientGrants{cred: cred, inos: make(map[engine.Ino]struct{})}
		if cg != nil && cg.cred == cred {
			fresh.searches = cg.searches
		}
		cg = fresh
		g.byClient[client] = cg
	}
	for _, ino := range inos {
		cg.inos[ino] = struct{}{}
	}
}

func (g *scopeGrants) has(client rpc.ClientID, cred string, ino engine.Ino) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	cg := g.byClient[client]
	if cg == nil || cg.cred != cred {
		return false
	}
	_, ok := cg.inos[ino]
	return ok
}

func (g *scopeGrants) drop(client rpc.ClientID) {
	g.mu.Lock()
	delete(g.byClient, client)
	g.mu.Unlock()
}

// confiner confines one call; it lives for the call, on the apply loop.
type confiner struct {
	e      *engine.Engine
	c      engine.Cred
	top    engine.Ino
	grants *scopeGrants
	client rpc.ClientID
	cred   string
	links  int
}

// confine rewrites o's request for its scope, on the apply loop, and
// returns 0, or the errno that refuses the call. A logged call's
// rewritten request is re-encoded and replaces the call's payload, which
// is what the log records.
func (sm *stateMachine) confine(o *op, grants *scopeGrants) uint32 {
	cr := o.sess.cred
	top, err := sm.eng.ResolveIno(engine.Cred{}, cr.Path, false)
	if err != nil {
		return uint32(syscall.EACCES) // the subtree is gone
	}
	cf := &confiner{e: sm.eng, c: o.cred, top: top, grants: grants, client: o.call.Client, cred: cr.Name}
	if err := cf.request(o.req); err != nil {
		return statusOf(err)
	}
	o.scopeTop = top
	if c := classOf(o.method); c == classMutation || c == classSession {
		data, err := proto.Marshal(o.req)
		if err != nil {
			return uint32(syscall.EIO)
		}
		o.call.Payload = data
	}
	return 0
}

// request rewrites the inodes and paths of one request.
func (cf *confiner) request(req proto.Message) error {
	var err error
	switch r := req.(type) {
	case *pb.NodeRequest:
		r.Ino, err = cf.node(r.Ino, r.Path, !r.Nofollow)
		r.Path = ""
	case *pb.SetattrRequest:
		r.Ino, err = cf.node(r.Ino, r.Path, true)
		r.Path = ""
	case *pb.ReaddirRequest:
		r.Ino, err = cf.node(r.Ino, r.Path, true)
		r.Path = ""
	case *pb.XattrRequest:
		r.Ino, err = cf.node(r.Ino, r.Path, true)
		r.Path = ""
	case *pb.OpenRequest:
		r.Ino, err = cf.node(r.Ino, r.Path, true)
		r.Path = ""
	case *pb.EntryRequest:
		r.Parent, r.Name, err = cf.entry(r.Parent, r.Path, r.Name)
		r.Path = ""
	case *pb.CreateRequest:
		r.Parent, r.Name, err = cf.entry(r.Parent, r.Path, r.Name)
		r.Path = ""
	case *pb.RenameRequest:
		if r.Parent, r.Name, err = cf.entry(r.Parent, r.Path, r.Name); err == nil {
			r.NewParent, r.NewName, err = cf.entry(r.NewParent, r.NewPath, r.NewName)
		}
		r.Path, r.NewPath = "", ""
	case *pb.LinkRequest:
		if r.Ino, err = cf.node(r.Ino, r.Path, false); err == nil {
			r.NewParent, r.NewName, err = cf.entry(r.NewParent, r.NewPath, r.NewName)
		}
		r.Path, r.NewPath = "", ""
	case *pb.AllocSlicesRequest:
		r.Ino, err = cf.node(r.Ino, "", false)
	case *pb.CommitRequest:
		r.Ino, err = cf.node(r.Ino, "", false)
	case *pb.ReadChunksRequest:
		r.Ino, err = cf.node(r.Ino, "", false)
	case *pb.CompactRequest:
		r.Ino, err = cf.node(r.Ino, "", false)
	case *pb.TablesRequest: // the mount table names no node
	default:
		err = errOutside
	}
	return err
}

// errOutside refuses a node outside the scope, or one this credential
// cannot name at all.
var errOutside = syscall.EACCES

// node confines a node named by path (if not empty) or inode.
func (cf *confiner) node(ino uint64, path string, follow bool) (uint64, error) {
	if path != "" {
		if !strings.HasPrefix(path, "/") {
			return 0, syscall.EINVAL
		}
		n, err := cf.walk(cf.top, path, follow)
		return uint64(n), err
	}
	if ino == 0 {
		return 0, syscall.EINVAL
	}
	n, err := cf.inside(engine.Ino(ino))
	return uint64(n), err
}

// inside maps the root to the top and checks that any other node lies in
// the scope.
func (cf *confiner) inside(ino engine.Ino) (engine.Ino, error) {
	if ino == cf.e.Root() {
		return cf.top, nil
	}
	ok, err := cf.e.DirUnder(ino, cf.top)
	if err == syscall.ENOTDIR {
		ok = cf.grants.has(cf.client, cf.cred, ino) || cf.search(ino)
	}
	if !ok {
		return 0, errOutside
	}
	return ino, nil
}

// search looks for a link to the node ino (not a directory) in the
// scope's subtree, for a node this server did not show the client: a
// replicated partition's new leader, or a server restarted, knows
// nothing of what the client was shown before. A node found is granted.
func (cf *confiner) search(ino engine.Ino) bool {
	if !cf.grants.maySearch(cf.client, cf.cred) {
		return false
	}
	ok, _ := cf.e.LinkedUnder(ino, cf.top, searchBudget)
	if ok {
		cf.grants.add(cf.client, cf.cred, ino)
	}
	return ok
}

// entry confines a directory entry named by path (if not empty) or by
// parent inode and name. ".." at the top is the top itself.
func (cf *confiner) entry(parent uint64, path, name string) (uint64, string, error) {
	var dir engine.Ino
	if path != "" {
		if !strings.HasPrefix(path, "/") {
			return 0, "", syscall.EINVAL
		}
		trimmed := strings.TrimRight(path, "/")
		if trimmed == "" {
			return 0, "", syscall.EBUSY // the root has no entry
		}
		i := strings.LastIndexByte(trimmed, '/')
		name = trimmed[i+1:]
		var err error
		if dir, err = cf.walk(cf.top, trimmed[:i+1], true); err != nil {
			return 0, "", err
		}
	} else {
		if parent == 0 {
			return 0, "", syscall.EINVAL
		}
		var err error
		if dir, err = cf.inside(engine.Ino(parent)); err != nil {
			return 0, "", err
		}
	}
	if name == ".." && dir == cf.top {
		name = "."
	}
	return uint64(dir), name, nil
}

// walk resolves path from start (from the top if absolute), never above
// the top, following symlinks as the engine does: always in the middle,
// in the last component if follow is set or the path ends in a slash.
func (cf *confiner) walk(start engine.Ino, path string, follow bool) (engine.Ino, error) {
	cur := start
	if strings.HasPrefix(path, "/") {
		cur = cf.top
	}
	trailing := strings.HasSuffix(path, "/")
	rest := strings.Trim(path, "/")
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		rest = strings.TrimLeft(rest, "/")
		if comp == "" {
			continue
		}
		if comp == ".." && cur == cf.top {
			comp = "."
		}
		a, err := cf.e.Lookup(cf.c, cur, comp)
		if err != nil {
			return 0, err
		}
		last := rest == ""
		if a.Mode&syscall.S_IFMT == syscall.S_IFLNK && (!last || follow || trailing) {
			if cf.links++; cf.links > engine.MaxSymlinks {
				return 0, syscall.ELOOP
			}
			target, err := cf.e.Readlink(a.Ino)
			if err != nil {
				return 0, err
			}
			if cur, err = cf.walk(cur, target, true); err != nil {
				return 0, err
			}
			continue
		}
		cur = a.Ino
	}
	if trailing {
		a, err := cf.e.GetAttr(cur)
		if err != nil {
			return 0, err
		}
		if a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return 0, syscall.ENOTDIR
		}
	}
	return cur, nil
}

// showReply grants the client the nodes a confined call's reply names
// and shows the top as the root. It changes a copy: the reply the state
// machine keeps (retry cache, checkpoints) is the same on every replica.
func (sm *stateMachine) showReply(o *op, grants *scopeGrants) {
	if o.status != 0 || o.reply == nil {
		return
	}
	cred := o.sess.cred.Name
	top, err := sm.eng.ResolveIno(engine.Cred{}, o.sess.cred.Path, false)
	if err != nil {
		return
	}
	root := sm.eng.Root()
	switch r := o.reply.(type) {
	case *pb.AttrReply:
		if r.Attr == nil {
			return
		}
		c := proto.Clone(r).(*pb.AttrReply)
		grants.add(o.call.Client, cred, engine.Ino(c.Attr.Ino))
		if engine.Ino(c.Attr.Ino) == top {
			c.Attr.Ino = uint64(root)
		}
		o.reply = c
	case *pb.ReaddirReply:
		inos := make([]engine.Ino, 0, len(r.Entries))
		for _, d := range r.Entries {
			inos = append(inos, engine.Ino(d.Ino))
		}
		grants.add(o.call.Client, cred, inos...)
	}
}
