package balance

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// MoveResult is what a move did; the CLI prints it (`canopy balance move
// --json`).
type MoveResult struct {
	Path     string   `json:"path"`
	VPart    uint16   `json:"vpart"`
	From     []uint16 `json:"from"` // the groups it ran on
	To       uint16   `json:"to"`
	Files    uint64   `json:"files"`   // its nodes
	Seconds  float64  `json:"seconds"` // the whole move
	FreezeMS float64  `json:"freeze_ms"`
	Replicas []string `json:"replicas"` // where it runs now
}

// MoveOptions are a move's optional parts.
type MoveOptions struct {
	// Owner names the mover in the move's intent (intent.go); "" gives a
	// random one.
	Owner string
	// Joining, if set, is called before each replica of the destination
	// is added, with its id and the addresses of the group's replicas (a
	// progress bar polls them); what it returns is called once the
	// replica votes or the add failed.
	Joining func(id uint64, addrs []string) (done func())
}

// member is one replica of the moving partition, with the group of the
// process it runs in.
type member struct {
	*pb.GroupMember
	group    uint16
	homeAddr string // where its process serves its own partition
}

// Move hands the virtual partition mounted at p to the processes of group
// to: a replica in each joins its Raft group and catches up, leadership
// passes to one of them (the freeze), the replicas it leaves are removed
// and stopped, and the routing table follows. Every step looks at what is
// there first, so a move run again after an interruption takes up where
// it stopped. The move's intent is kept on the partition's root while it
// runs and stays when it fails, so that a router's recovery pass finishes
// it (Recover).
func Move(ctx context.Context, e Env, p string, to uint16, opts MoveOptions) (*MoveResult, error) {
	return moveAs(ctx, e, p, to, opts, false)
}

// moveAs is Move; with onlyStale, it takes over only a move whose mover
// stopped.
func moveAs(ctx context.Context, e Env, p string, to uint16, opts MoveOptions, onlyStale bool) (*MoveResult, error) {
	start := time.Now()
	t, err := e.ReadTables(ctx)
	if err != nil {
		return nil, err
	}
	m, ok := MountOf(t, p)
	if !ok || m.Prefix != p || m.Target != "/" {
		return nil, fmt.Errorf("move %s: not the top of a virtual partition (canopy balance split makes one): %w", p, syscall.EINVAL)
	}
	v := uint16(m.Vpart)
	if v == to {
		return nil, fmt.Errorf("move %s: virtual partition %d is group %d's own: %w", p, v, to, syscall.EINVAL)
	}
	srcAddrs, ok := RouteOf(t, v)
	if !ok {
		return nil, fmt.Errorf("move %s: virtual partition %d has no route", p, v)
	}
	dstHosts, ok := RouteOf(t, to)
	if !ok || len(dstHosts) == 0 {
		return nil, fmt.Errorf("move %s: group %d has no route", p, to)
	}
	leader, err := e.Leader(ctx, srcAddrs)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	members, err := e.placeMembers(ctx, v, leader.Members)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	in, err := e.claim(ctx, srcAddrs, v, to, opts.Owner, onlyStale)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	renewing := in.renew(ctx, e, srcAddrs, v)
	res, err := e.move(ctx, p, v, to, srcAddrs, dstHosts, members, opts)
	renewing()
	if err != nil {
		return nil, err
	}
	if err := e.clearIntent(ctx, res.Replicas, v, in.Owner); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// move is Move once the partition and its members are known.
func (e Env) move(ctx context.Context, p string, v, to uint16, srcAddrs, dstHosts []string, members []member, opts MoveOptions) (*MoveResult, error) {
	res := &MoveResult{Path: p, VPart: v, To: to, From: []uint16{}}
	for _, mb := range members {
		if mb.group != to && !slices.Contains(res.From, mb.group) {
			res.From = append(res.From, mb.group)
		}
	}

	// 1. A replica in each process of the destination, caught up and voting.
	var arrived []*pb.HostReplica
	nextID := uint64(0)
	for _, mb := range members {
		nextID = max(nextID, mb.Id)
	}
	for _, h := range dstHosts {
		l, err := e.HostList(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", p, err)
		}
		id := uint64(0)
		if i := slices.IndexFunc(l.Replicas, func(r *pb.HostReplica) bool { return r.Partition == uint32(v) }); i >= 0 {
			// Left by a move that stopped midway: a voter stays, a learner
			// is added again (caught up, then promoted), and one the group
			// does not know is started over.
			r := l.Replicas[i]
			j := slices.IndexFunc(members, func(mb member) bool { return mb.Id == r.Id })
			switch {
			case j >= 0 && !members[j].Learner:
				arrived = append(arrived, r)
				continue
			case j >= 0:
				id = r.Id
			default:
				if err := e.hostStop(ctx, l.HomeAddr, v, r.Id); err != nil {
					return nil, fmt.Errorf("move %s: %w", p, err)
				}
			}
		}
		if id == 0 {
			nextID++
			id = nextID
		}
		done := func() {}
		if opts.Joining != nil {
			done = opts.Joining(id, srcAddrs)
		}
		r, err := e.JoinReplica(ctx, h, v, id, hostReplicas(members, arrived))
		done()
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", p, err)
		}
		arrived = append(arrived, r)
	}
	newAddrs := make([]string, len(arrived))
	for i, r := range arrived {
		newAddrs[i] = r.Addr
	}
	union := slices.Clone(newAddrs)
	for _, a := range srcAddrs {
		if !slices.Contains(union, a) {
			union = append(union, a)
		}
	}
	if err := e.setRoute(ctx, v, union); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}

	// 2. The freeze: leadership passes to the destination.
	leader, err := e.Leader(ctx, union)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	if !slices.ContainsFunc(arrived, func(r *pb.HostReplica) bool { return r.Id == leader.Leader }) {
		began := time.Now()
		if err := e.Call(ctx, union, pb.Method_GROUP_TRANSFER, &pb.GroupTransferRequest{To: arrived[0].Id}, nil); err != nil {
			return nil, fmt.Errorf("move %s: hand leadership to replica %d: %w", p, arrived[0].Id, err)
		}
		res.FreezeMS = float64(time.Since(began).Microseconds()) / 1000
	}

	// 3. The source's replicas leave, and the route follows.
	for _, mb := range members {
		if slices.ContainsFunc(arrived, func(r *pb.HostReplica) bool { return r.Id == mb.Id }) {
			continue
		}
		var gr pb.GroupReply
		if err := e.Call(ctx, newAddrs, pb.Method_GROUP_REMOVE, &pb.GroupRemoveRequest{Id: mb.Id}, &gr); err != nil {
			return nil, fmt.Errorf("move %s: remove replica %d: %w", p, mb.Id, err)
		}
		if err := e.hostStop(ctx, mb.homeAddr, v, mb.Id); err != nil {
			return nil, fmt.Errorf("move %s: %w", p, err)
		}
	}
	// Replicas the group no longer has that a move stopped midway left
	// running (removed, not yet stopped) go too: every process of the
	// namespace is asked (by the addresses of every route; a replica
	// removed from its group may no longer answer at its own).
	if err := e.stopStrays(ctx, v, arrived); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	if err := e.setRoute(ctx, v, newAddrs); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	var st pb.StatusReply
	if err := e.Call(ctx, newAddrs, pb.Method_STATUS, &pb.StatusRequest{}, &st); err == nil {
		res.Files = st.Nodes
	}
	res.Replicas = newAddrs
	return res, nil
}

// stopStrays stops, in every process reachable through the routes, the
// replicas of v that are not among keep. A process that does not answer
// is passed over: its stray is stopped by a later move of v.
func (e Env) stopStrays(ctx context.Context, v uint16, keep []*pb.HostReplica) error {
	t, err := e.ReadTables(ctx)
	if err != nil {
		return err
	}
	asked := map[string]bool{}
	for _, r := range t.Routes {
		for _, a := range r.Addrs {
			if asked[a] {
				continue
			}
			asked[a] = true
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			l, err := e.HostList(lctx, a)
			cancel()
			if err != nil || asked["home "+l.HomeAddr] {
				continue
			}
			asked["home "+l.HomeAddr] = true
			for _, h := range l.Replicas {
				if h.Partition == uint32(v) && !slices.ContainsFunc(keep, func(x *pb.HostReplica) bool { return x.Id == h.Id }) {
					if err := e.hostStop(ctx, l.HomeAddr, v, h.Id); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// placeMembers finds the group of the process each member runs in, and
// refuses a partition that some process runs as its own.
func (e Env) placeMembers(ctx context.Context, v uint16, ms []*pb.GroupMember) ([]member, error) {
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		l, err := e.HostList(ctx, m.Addr)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(l.Replicas, func(r *pb.HostReplica) bool { return r.Partition == uint32(v) && r.Id == m.Id }) {
			return nil, fmt.Errorf("virtual partition %d is the own partition of the process at %s; "+
				"only virtual partitions made by canopy balance split move: %w", v, m.Addr, syscall.EINVAL)
		}
		out = append(out, member{GroupMember: m, group: uint16(l.Home), homeAddr: l.HomeAddr})
	}
	return out, nil
}

// hostReplicas lists the group's replicas with their addresses, for a
// replica that joins.
func hostReplicas(ms []member, arrived []*pb.HostReplica) []*pb.HostReplica {
	out := slices.Clone(arrived)
	for _, m := range ms {
		if !slices.ContainsFunc(out, func(r *pb.HostReplica) bool { return r.Id == m.Id }) {
			out = append(out, &pb.HostReplica{Id: m.Id, Addr: m.Addr, RaftAddr: m.RaftAddr})
		}
	}
	return out
}
