package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"syscall"

	"github.com/canopyfs/canopy/internal/mount"
)

// The federation tables (the mount table and the routing table, see
// internal/mount) live in the root partition, partition 0, next to its
// namespace: they are changed by logged mutations and carried in
// checkpoints like the tree, so they are as durable as any file. Other
// partitions hold none and refuse the table operations.
//
// One version counts the changes to both tables: every successful update
// increments it, and the mount table's and routing table's own Version
// fields both carry it, so a router can publish either snapshot knowing it
// is newer than the one it replaces.

// TablesPartition is the partition that keeps the federation tables.
const TablesPartition = 0

// Limits on the tables, so that a checkpoint or an update cannot make the
// partition hold without bound.
const (
	MaxMountEntries = 1 << 16 // entries in the mount table
	MaxGroupAddrs   = 16      // addresses of one virtual partition's group
	MaxAddrLen      = 255     // bytes in one address
)

// ErrNoTables reports a table operation on a partition other than
// TablesPartition.
var ErrNoTables = fmt.Errorf("engine: the federation tables are kept by partition %d: %w", TablesPartition, syscall.EOPNOTSUPP)

// Tables is the mount table and the routing table at one version. A value
// returned by the engine is the caller's: the engine keeps no reference to
// it.
type Tables struct {
	Version uint64
	Mounts  mount.Table   // Mounts.Version == Version
	Routes  mount.Routing // Routes.Version == Version; Groups never nil
}

// TablesUpdate is one atomic edit of the tables. Edits apply in this
// order: RemoveMounts, SetMounts (adding or replacing by prefix), then
// SetRoutes (replacing a virtual partition's addresses; an empty list
// removes its route). Either every edit applies and the version goes up by
// one, or none does.
type TablesUpdate struct {
	ExpectedVersion uint64 // if not 0, the update fails with ESTALE unless the tables are at this version
	RemoveMounts    []string
	SetMounts       []mount.Entry
	SetRoutes       map[uint16][]string
}

// initialTables are the tables of a fresh root partition: "/" mounted from
// the root of virtual partition 0, no routes.
func initialTables() Tables {
	return Tables{
		Mounts: mount.Table{Entries: []mount.Entry{{Prefix: "/", VPart: 0, Target: "/"}}},
		Routes: mount.Routing{Groups: map[uint16][]string{}},
	}
}

// tablesFor returns the tables a fresh partition p starts with.
func tablesFor(p uint16) Tables {
	if p == TablesPartition {
		return initialTables()
	}
	return Tables{Routes: mount.Routing{Groups: map[uint16][]string{}}}
}

// Tables returns a copy of the federation tables. It fails with
// ErrNoTables on a partition other than TablesPartition.
func (e *Engine) Tables() (Tables, error) {
	if e.part != TablesPartition {
		return Tables{}, ErrNoTables
	}
	return e.tables.clone(), nil
}

// TablesVersion returns the tables' version (0 on a partition that keeps
// none).
func (e *Engine) TablesVersion() uint64 { return e.tables.Version }

// UpdateTables applies u atomically and returns the tables it produced.
// Only the superuser may change them (EPERM). A version mismatch fails
// with ESTALE; an update that changes nothing, or whose result is invalid
// (see mount.Table.Validate and mount.Routing.Validate, and the limits
// above), fails with EINVAL, removing a prefix that is not mounted or the
// route of a virtual partition that has none with ENOENT. The errors wrap
// the errno and say what is wrong.
func (e *Engine) UpdateTables(c Cred, u TablesUpdate) (Tables, error) {
	if e.part != TablesPartition {
		return Tables{}, ErrNoTables
	}
	if !c.IsRoot() {
		return Tables{}, fmt.Errorf("engine: only the superuser may change the federation tables: %w", syscall.EPERM)
	}
	cur := e.tables.Version
	if u.ExpectedVersion != 0 && u.ExpectedVersion != cur {
		return Tables{}, fmt.Errorf("engine: tables are at version %d, not %d: %w", cur, u.ExpectedVersion, syscall.ESTALE)
	}
	if len(u.RemoveMounts) == 0 && len(u.SetMounts) == 0 && len(u.SetRoutes) == 0 {
		return Tables{}, fmt.Errorf("engine: tables update changes nothing: %w", syscall.EINVAL)
	}
	t := e.tables.clone()
	var err error
	for _, p := range u.RemoveMounts {
		if t.Mounts, err = t.Mounts.Remove(p); err != nil {
			return Tables{}, err
		}
	}
	for _, m := range u.SetMounts {
		if t.Mounts, err = t.Mounts.Set(m); err != nil {
			return Tables{}, err
		}
	}
	if len(t.Mounts.Entries) > MaxMountEntries {
		return Tables{}, fmt.Errorf("engine: %d mount entries, limit %d: %w", len(t.Mounts.Entries), MaxMountEntries, syscall.EINVAL)
	}
	for _, vp := range slices.Sorted(maps.Keys(u.SetRoutes)) {
		addrs := u.SetRoutes[vp]
		if len(addrs) == 0 {
			if _, ok := t.Routes.Groups[vp]; !ok {
				return Tables{}, fmt.Errorf("engine: vpart %d has no route to remove: %w", vp, syscall.ENOENT)
			}
			delete(t.Routes.Groups, vp)
			continue
		}
		if err := checkAddrs(vp, addrs); err != nil {
			return Tables{}, err
		}
		t.Routes.Groups[vp] = slices.Clone(addrs)
	}
	if err := t.Routes.Validate(); err != nil {
		return Tables{}, err
	}
	if err := t.Mounts.Validate(); err != nil {
		return Tables{}, err
	}
	t.Version = cur + 1
	t.Mounts.Version, t.Routes.Version = t.Version, t.Version
	e.tables = t
	return t.clone(), nil
}

// checkAddrs applies the engine's limits to one group's addresses.
func checkAddrs(vp uint16, addrs []string) error {
	if len(addrs) > MaxGroupAddrs {
		return fmt.Errorf("engine: vpart %d: %d addresses, limit %d: %w", vp, len(addrs), MaxGroupAddrs, syscall.EINVAL)
	}
	for _, a := range addrs {
		if len(a) > MaxAddrLen {
			return fmt.Errorf("engine: vpart %d: address of %d bytes, limit %d: %w", vp, len(a), MaxAddrLen, syscall.EINVAL)
		}
	}
	return nil
}

// clone returns a deep copy of t.
func (t Tables) clone() Tables {
	out := Tables{
		Version: t.Version,
		Mounts:  mount.Table{Version: t.Mounts.Version, Entries: slices.Clone(t.Mounts.Entries)},
		Routes:  mount.Routing{Version: t.Routes.Version, Groups: make(map[uint16][]string, len(t.Routes.Groups))},
	}
	for vp, addrs := range t.Routes.Groups {
		out.Routes.Groups[vp] = slices.Clone(addrs)
	}
	return out
}

// tables writes the federation tables after the nodes of a checkpoint.
func (enc *encoder) tables(t *Tables) {
	enc.uint(t.Version)
	enc.uint(uint64(len(t.Mounts.Entries)))
	for _, m := range t.Mounts.Entries {
		enc.str(m.Prefix)
		enc.uint(uint64(m.VPart))
		enc.str(m.Target)
		ro := uint64(0)
		if m.ReadOnly {
			ro = 1
		}
		enc.uint(ro)
	}
	vps := slices.Sorted(maps.Keys(t.Routes.Groups))
	enc.uint(uint64(len(vps)))
	for _, vp := range vps {
		enc.uint(uint64(vp))
		addrs := t.Routes.Groups[vp]
		enc.uint(uint64(len(addrs)))
		for _, a := range addrs {
			enc.str(a)
		}
	}
}

// errBadTables reports tables in a checkpoint that break the rules
// UpdateTables keeps.
var errBadTables = errors.New("bad federation tables")

// tables reads what encoder.tables wrote for partition part and checks it.
func (d *decoder) tables(part uint16) (Tables, error) {
	t := Tables{Routes: mount.Routing{Groups: map[uint16][]string{}}}
	t.Version = d.uint()
	n := d.uint()
	if d.err == nil && n > MaxMountEntries {
		return Tables{}, fmt.Errorf("%w: %d mount entries", errBadTables, n)
	}
	for range n {
		var m mount.Entry
		m.Prefix = d.str(mount.MaxPathLen)
		vp := d.uint()
		m.Target = d.str(mount.MaxPathLen)
		ro := d.uint()
		if d.err != nil {
			return Tables{}, d.err
		}
		if vp >= mount.VirtualPartitions || ro > 1 {
			return Tables{}, fmt.Errorf("%w: entry %q: vpart %d, read-only %d", errBadTables, m.Prefix, vp, ro)
		}
		m.VPart, m.ReadOnly = uint16(vp), ro == 1
		t.Mounts.Entries = append(t.Mounts.Entries, m)
	}
	groups := d.uint()
	if d.err == nil && groups > mount.VirtualPartitions {
		return Tables{}, fmt.Errorf("%w: %d routes", errBadTables, groups)
	}
	for range groups {
		vp := d.uint()
		na := d.uint()
		if d.err != nil {
			return Tables{}, d.err
		}
		if vp >= mount.VirtualPartitions || na == 0 || na > MaxGroupAddrs {
			return Tables{}, fmt.Errorf("%w: route of vpart %d with %d addresses", errBadTables, vp, na)
		}
		if _, dup := t.Routes.Groups[uint16(vp)]; dup {
			return Tables{}, fmt.Errorf("%w: vpart %d routed twice", errBadTables, vp)
		}
		addrs := make([]string, na)
		for i := range addrs {
			addrs[i] = d.str(MaxAddrLen)
		}
		t.Routes.Groups[uint16(vp)] = addrs
	}
	if d.err != nil {
		return Tables{}, d.err
	}
	t.Mounts.Version, t.Routes.Version = t.Version, t.Version
	if part != TablesPartition {
		if t.Version != 0 || len(t.Mounts.Entries) != 0 || len(t.Routes.Groups) != 0 {
			return Tables{}, fmt.Errorf("%w: partition %d holds tables", errBadTables, part)
		}
		return t, nil
	}
	if err := t.Mounts.Validate(); err != nil {
		return Tables{}, fmt.Errorf("%w: %w", errBadTables, err)
	}
	if err := t.Routes.Validate(); err != nil {
		return Tables{}, fmt.Errorf("%w: %w", errBadTables, err)
	}
	return t, nil
}
