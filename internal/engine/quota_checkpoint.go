package engine

import (
	"errors"
	"fmt"
	"syscall"
)

// Quotas in checkpoints, dumps and the invariant check. A checkpoint keeps
// the limits only, after the data section: the number of quotas, then each
// quota's directory, file limit and byte limit, by directory. Load counts
// the usage and the tags again from the tree (rebuildQuotas), so they are
// what a replica that applied the same operations keeps, and the
// checkpoint stays a function of the operations.

// maxCkptQuotas bounds the quotas a checkpoint may claim.
const maxCkptQuotas = 1 << 24

func (e *encoder) quotas(list []QuotaLimit) {
	e.uint(uint64(len(list)))
	for _, q := range list {
		e.uint(uint64(q.Dir))
		e.uint(q.MaxFiles)
		e.uint(q.MaxBytes)
	}
}

// readQuotas reads the quota section into e. Their usage is counted by
// the Check that Load runs, once the tree is known to be one (stale).
func (d *decoder) readQuotas(e *Engine) {
	n := d.uint()
	if d.err == nil && n > maxCkptQuotas {
		d.err = fmt.Errorf("%d quotas", n)
	}
	var list []QuotaLimit
	for i := uint64(0); i < n && d.err == nil; i++ {
		q := QuotaLimit{Dir: Ino(d.uint()), MaxFiles: d.uint(), MaxBytes: d.uint()}
		if d.err == nil && len(list) > 0 && q.Dir <= list[len(list)-1].Dir {
			d.err = fmt.Errorf("quota on %d out of order", q.Dir)
		}
		list = append(list, q)
	}
	if d.err != nil || len(list) == 0 {
		return
	}
	e.quota = quotaState{dirs: make(map[Ino]*quotaUse, len(list)), list: list}
	for _, q := range list {
		if n := e.st.peek(q.Dir); n == nil || !n.isDir() {
			d.err = fmt.Errorf("quota on %d, which is not a directory", q.Dir)
			return
		}
		e.quota.dirs[q.Dir] = &quotaUse{QuotaLimit: q}
	}
	e.quota.stale = true
}

// rebuildQuotas counts every quota's usage and the tags from the tree.
func (e *Engine) rebuildQuotas() error {
	for _, q := range e.quota.list {
		files, bytes, err := e.countBelow(q.Dir)
		if err != nil {
			return err
		}
		u := e.quota.dirs[q.Dir]
		u.files, u.bytes = files, bytes
		_, _, region, err := e.regionUsage(e.st.peek(q.Dir))
		if err != nil {
			return fmt.Errorf("quota on %d: a node below has links outside: %w", q.Dir, err)
		}
		for _, slot := range region {
			e.setRegion(e.at(slot), q.Dir)
		}
	}
	return nil
}

// clearRegions sets every node's region to none.
func (e *Engine) clearRegions() {
	for slot := uint32(1); slot < e.st.nodes.next; slot++ {
		if n := e.peekAt(slot); n.Ino != 0 && e.regionOfNode(n) != 0 {
			e.setRegion(e.at(slot), 0)
		}
	}
}

// regionCount returns the nodes that have a region.
func (e *Engine) regionCount() int {
	k := 0
	for slot := uint32(1); slot < e.st.nodes.next; slot++ {
		if n := e.peekAt(slot); n.Ino != 0 && e.regionOfNode(n) != 0 {
			k++
		}
	}
	return k
}

// countBelow counts the nodes and bytes below directory dir by walking its
// whole subtree, each node once: the count a quota's usage must equal.
func (e *Engine) countBelow(dir Ino) (files, bytes uint64, err error) {
	d := e.st.peek(dir)
	if d == nil || !d.isDir() {
		return 0, 0, fmt.Errorf("quota on %d, which is not a directory", dir)
	}
	seen := make(map[uint32]bool)
	stack := []*node{d}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e.st.extraOf(n).dir.each(func(_ []byte, slot uint32) bool {
			c := e.peekAt(slot)
			if c.Nlink > 1 && !c.isDir() {
				if seen[slot] {
					return true
				}
				seen[slot] = true
			}
			files++
			if c.isDir() {
				stack = append(stack, c)
			} else {
				bytes += bytesOf(c)
			}
			return true
		})
	}
	return files, bytes, nil
}

// CheckQuotas counts every quota's usage from the tree and returns those
// whose kept usage differs.
func (e *Engine) CheckQuotas() ([]QuotaMismatch, error) {
	var out []QuotaMismatch
	for _, q := range e.quota.list {
		files, bytes, err := e.countBelow(q.Dir)
		if err != nil {
			return nil, err
		}
		if u := e.quota.dirs[q.Dir]; u.files != files || u.bytes != bytes {
			out = append(out, QuotaMismatch{Dir: q.Dir, Files: u.files, Bytes: u.bytes, CountFiles: files, CountBytes: bytes})
		}
	}
	return out, nil
}

// RepairQuotas sets every quota's usage and the tags to a full count of
// the tree and returns the quotas whose usage was wrong. Only root may
// (EPERM).
func (e *Engine) RepairQuotas(c Cred) ([]QuotaMismatch, error) {
	if !c.IsRoot() {
		return nil, syscall.EPERM
	}
	bad, err := e.CheckQuotas()
	if err != nil || e.quota.dirs == nil {
		return bad, err
	}
	e.clearRegions()
	return bad, e.rebuildQuotas()
}

// errQuota reports a quota invariant that does not hold.
var errQuota = errors.New("quota")

// checkQuotas is the invariant check's part for quotas: the directory
// quotas' and the owner quotas' (checkOwnerQuotas).
func (e *Engine) checkQuotas() error {
	if err := e.checkDirQuotas(); err != nil {
		return err
	}
	return e.checkOwnerQuotas()
}

// checkDirQuotas is the invariant check's part for directory quotas:
// every quota is on a directory, the list and the map agree, every usage
// equals a full count and every tag is the nearest quota over its node.
func (e *Engine) checkDirQuotas() error {
	if e.quota.dirs == nil {
		if len(e.quota.list) > 0 || e.regionCount() > 0 {
			return fmt.Errorf("%w: a list or tags without quotas", errQuota)
		}
		return nil
	}
	if e.quota.stale {
		// Just loaded: the tree has passed its checks, so it can be walked.
		if err := e.rebuildQuotas(); err != nil {
			return fmt.Errorf("%w: %w", errQuota, err)
		}
		e.quota.stale = false
	}
	if len(e.quota.list) != len(e.quota.dirs) {
		return fmt.Errorf("%w: %d listed, %d kept", errQuota, len(e.quota.list), len(e.quota.dirs))
	}
	for i, q := range e.quota.list {
		u := e.quota.dirs[q.Dir]
		if u == nil || u.QuotaLimit != q || i > 0 && q.Dir <= e.quota.list[i-1].Dir {
			return fmt.Errorf("%w: list entry %d (%d) does not match", errQuota, i, q.Dir)
		}
	}
	bad, err := e.CheckQuotas()
	if err != nil {
		return fmt.Errorf("%w: %w", errQuota, err)
	}
	if len(bad) > 0 {
		b := bad[0]
		return fmt.Errorf("%w on %d: usage %d files %d bytes, counted %d files %d bytes",
			errQuota, b.Dir, b.Files, b.Bytes, b.CountFiles, b.CountBytes)
	}
	want := 0
	for _, q := range e.quota.list {
		_, _, region, err := e.regionUsage(e.st.peek(q.Dir))
		if err != nil {
			return fmt.Errorf("%w on %d: a node below has links outside", errQuota, q.Dir)
		}
		for _, slot := range region {
			ino := e.peekAt(slot).Ino
			if got := e.regionOfNode(e.peekAt(slot)); got != q.Dir {
				return fmt.Errorf("%w: node %d tagged %d, nearest quota %d", errQuota, ino, got, q.Dir)
			}
		}
		want += len(region)
	}
	if got := e.regionCount(); got != want {
		return fmt.Errorf("%w: %d tags, %d nodes below quotas", errQuota, got, want)
	}
	return nil
}
