package router

import (
	"github.com/canopyfs/canopy/internal/protocol"
)

// statfsNamesNode reports whether a STATFS names a node that is not the
// root of its partition: such a call goes to that node's partition, which
// answers with the nearest directory quota's figures (df inside a
// directory with a quota). A call naming a partition's root, or none, is
// answered with the sum over the partitions.
func (r *Router) statfsNamesNode(v *view, payload []byte) bool {
	f, err := readFields(payload)
	if err != nil {
		return false
	}
	if f.path != "" {
		rt, err := r.lookup(v, f.path)
		return err == nil && rt.entry != nil && rt.inner != "/"
	}
	return f.ino != 0 && !protocol.IsRoot(f.ino)
}
