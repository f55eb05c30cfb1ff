package mount

import (
	"fmt"
	"sort"
	"sync/atomic"
	"syscall"
)

// Routing is the durable form of the routing table: which metadata group
// serves each virtual partition, as the addresses of the group's members.
// Virtual partitions without a group are not served (yet). Rebalancing
// changes this table, never the mount entries.
type Routing struct {
	Version uint64
	Groups  map[uint16][]string
}

// Validate reports the first problem in r, in increasing order of virtual
// partition: a partition outside [0, VirtualPartitions), a group without
// addresses, an empty address, or an address listed twice in one group.
// The error wraps syscall.EINVAL.
func (r *Routing) Validate() error {
	vps := make([]int, 0, len(r.Groups))
	for vp := range r.Groups {
		vps = append(vps, int(vp))
	}
	sort.Ints(vps)
	for _, vp := range vps {
		if vp >= VirtualPartitions {
			return routingError("vpart %d is out of range [0, %d)", vp, VirtualPartitions)
		}
		addrs := r.Groups[uint16(vp)]
		if len(addrs) == 0 {
			return routingError("vpart %d has an empty group", vp)
		}
		for i, a := range addrs {
			if a == "" {
				return routingError("vpart %d has an empty address", vp)
			}
			for _, b := range addrs[:i] {
				if a == b {
					return routingError("vpart %d lists %q twice", vp, a)
				}
			}
		}
	}
	return nil
}

func routingError(format string, args ...any) error {
	return fmt.Errorf("mount: routing: "+format+": %w", append(args, syscall.EINVAL)...)
}

// RoutingSnapshot is the compiled, immutable form of a Routing: an array
// indexed by virtual partition. It is safe for concurrent use without
// locking.
type RoutingSnapshot struct {
	version uint64
	groups  [VirtualPartitions][]string
}

// CompileRouting checks r (see Routing.Validate) and compiles it. The
// snapshot keeps its own copy of the address lists.
func CompileRouting(r Routing) (*RoutingSnapshot, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	rs := &RoutingSnapshot{version: r.Version}
	for vp, addrs := range r.Groups {
		rs.groups[vp] = append([]string(nil), addrs...)
	}
	return rs, nil
}

// Version returns the version of the Routing the snapshot was compiled
// from.
func (rs *RoutingSnapshot) Version() uint64 { return rs.version }

// Group returns the addresses of the group serving vp, or nil if vp has no
// group or is out of range. The slice belongs to the snapshot and must not
// be modified.
func (rs *RoutingSnapshot) Group(vp uint16) []string {
	if rs == nil || vp >= VirtualPartitions {
		return nil
	}
	return rs.groups[vp]
}

// Routing returns the routing table the snapshot was compiled from (a
// copy).
func (rs *RoutingSnapshot) Routing() Routing {
	r := Routing{Version: rs.version, Groups: make(map[uint16][]string)}
	for vp, addrs := range rs.groups {
		if addrs != nil {
			r.Groups[uint16(vp)] = append([]string(nil), addrs...)
		}
	}
	return r
}

// Unrouted returns the virtual partitions that entries of s point at but
// rs gives no group, in increasing order: the paths they own cannot be
// served.
func Unrouted(s *Snapshot, rs *RoutingSnapshot) []uint16 {
	var seen [VirtualPartitions]bool
	var out []uint16
	for i := range s.entries {
		vp := s.entries[i].VPart
		if !seen[vp] && rs.Group(vp) == nil {
			out = append(out, vp)
		}
		seen[vp] = true
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// CurrentRouting holds the live routing snapshot, as Current does for the
// mount table: Load is lock-free, Store publishes only a newer version.
type CurrentRouting struct {
	p atomic.Pointer[RoutingSnapshot]
}

// Load returns the live routing snapshot, or nil if none has been stored.
func (c *CurrentRouting) Load() *RoutingSnapshot { return c.p.Load() }

// Store makes rs the live routing snapshot if its version is newer than
// the live one's (or none is stored), and reports whether it did.
func (c *CurrentRouting) Store(rs *RoutingSnapshot) bool {
	return storeNewer(&c.p, rs, (*RoutingSnapshot).Version)
}
