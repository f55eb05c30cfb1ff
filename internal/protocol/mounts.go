package protocol

import (
	"fmt"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/mount"
)

// EntryFromWire converts a mount entry as it travels in TABLES_GET and
// TABLES_UPDATE into the mount table's form. A virtual partition outside
// the fixed space is refused (EINVAL) rather than cut to 16 bits; paths
// are left for mount.Table.Validate to judge.
func EntryFromWire(m *pb.MountEntry) (mount.Entry, error) {
	if m.GetVpart() >= mount.VirtualPartitions {
		return mount.Entry{}, fmt.Errorf("mount %q: vpart %d is out of range [0, %d): %w",
			m.GetPrefix(), m.GetVpart(), mount.VirtualPartitions, syscall.EINVAL)
	}
	return mount.Entry{Prefix: m.GetPrefix(), VPart: uint16(m.GetVpart()), Target: m.GetTarget(), ReadOnly: m.GetReadOnly()}, nil
}

// EntryToWire converts a mount table entry into its wire form.
func EntryToWire(e mount.Entry) *pb.MountEntry {
	return &pb.MountEntry{Prefix: e.Prefix, Vpart: uint32(e.VPart), Target: e.Target, ReadOnly: e.ReadOnly}
}

// EntriesToWire converts a whole table's entries, in order.
func EntriesToWire(es []mount.Entry) []*pb.MountEntry {
	out := make([]*pb.MountEntry, len(es))
	for i, e := range es {
		out[i] = EntryToWire(e)
	}
	return out
}
