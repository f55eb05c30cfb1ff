// Package balance places virtual partitions on groups of metadata server
// processes and moves them between groups by Raft membership changes
// (docs/rebalance.md). A group is named by the partition its processes
// were started for; a virtual partition made by a split is hosted by
// other processes (internal/host) and moves whole, with its inode
// numbers.
//
// The package speaks the protocol only (api/metapb over internal/rpc),
// through an Env its user gives: the CLI's commands and the router's
// recovery pass, which finishes the moves whose mover stopped.
package balance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Env is how the package reaches the cluster.
type Env struct {
	// Call sends one call, as the superuser, to the servers at addrs (a
	// group's replicas, or one process), following NOT_LEADER, and decodes
	// the reply into reply (nil: none). A refusal is a syscall.Errno,
	// wrapped with the server's message when it sent one.
	Call func(ctx context.Context, addrs []string, m pb.Method, req, reply proto.Message) error
	// Root are the addresses that answer TABLES_GET and TABLES_UPDATE:
	// routers, or the root partition's replicas.
	Root []string
}

// ReadTables reads the federation tables.
func (e Env) ReadTables(ctx context.Context) (*pb.TablesReply, error) {
	var t pb.TablesReply
	if err := e.Call(ctx, e.Root, pb.Method_TABLES_GET, &pb.TablesRequest{Ino: protocol.RootIno(0)}, &t); err != nil {
		return nil, fmt.Errorf("read the tables: %w", err)
	}
	return &t, nil
}

// UpdateTables changes the tables (if they are still at
// u.ExpectedVersion, when set).
func (e Env) UpdateTables(ctx context.Context, u *pb.TablesUpdate) error {
	u.Ino = protocol.RootIno(0)
	return e.Call(ctx, e.Root, pb.Method_TABLES_UPDATE, u, &pb.TablesReply{})
}

// FreeVPart returns the largest virtual partition that neither table
// names: groups take their numbers from 0 up (`canopy up --partitions N`
// makes 0..N-1), the partitions splits make take theirs from the top.
func FreeVPart(t *pb.TablesReply) (uint16, error) {
	used := map[uint32]bool{0: true}
	for _, r := range t.Routes {
		used[r.Vpart] = true
	}
	for _, m := range t.Mounts {
		used[m.Vpart] = true
	}
	for v := uint32(mount.VirtualPartitions - 1); v > 0; v-- {
		if !used[v] {
			return uint16(v), nil
		}
	}
	return 0, fmt.Errorf("every virtual partition is in use: %w", syscall.ENOSPC)
}

// MountOf returns the mount entry that holds p: the one with the longest
// prefix that is p or an ancestor of it.
func MountOf(t *pb.TablesReply, p string) (*pb.MountEntry, bool) {
	var best *pb.MountEntry
	for _, m := range t.Mounts {
		if m.Prefix == p || m.Prefix == "/" || strings.HasPrefix(p, m.Prefix+"/") {
			if best == nil || len(m.Prefix) > len(best.Prefix) {
				best = m
			}
		}
	}
	return best, best != nil
}

// RouteOf returns the replica addresses of virtual partition v.
func RouteOf(t *pb.TablesReply, v uint16) ([]string, bool) {
	for _, r := range t.Routes {
		if r.Vpart == uint32(v) {
			return r.Addrs, true
		}
	}
	return nil, false
}

// setRoute sets the routing table's replica list of v, reading the tables
// again when another change came first.
func (e Env) setRoute(ctx context.Context, v uint16, addrs []string) error {
	for {
		t, err := e.ReadTables(ctx)
		if err != nil {
			return err
		}
		if cur, _ := RouteOf(t, v); slices.Equal(cur, addrs) {
			return nil
		}
		err = e.UpdateTables(ctx, &pb.TablesUpdate{ExpectedVersion: t.Version, SetRoutes: []*pb.Route{{Vpart: uint32(v), Addrs: addrs}}})
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.ESTALE) || ctx.Err() != nil {
			return fmt.Errorf("route virtual partition %d to %v: %w", v, addrs, err)
		}
	}
}

// askGroup asks one replica for its view of its group.
func (e Env) askGroup(ctx context.Context, addr string) (*pb.GroupReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var gr pb.GroupReply
	if err := e.Call(ctx, []string{addr}, pb.Method_GROUP_STATUS, &pb.GroupRequest{}, &gr); err != nil {
		return nil, err
	}
	return &gr, nil
}

// Leader asks the replicas at addrs for their group until one knows a
// leader, and returns that leader's view of the group (members with their
// match and lag). A partition that is not replicated answers for itself.
func (e Env) Leader(ctx context.Context, addrs []string) (*pb.GroupReply, error) {
	var last error
	for {
		for _, a := range addrs {
			gr, err := e.askGroup(ctx, a)
			switch {
			case err != nil:
				last = err
			case gr.Role == "single" || gr.Role == "Leader":
				return gr, nil
			case gr.LeaderAddr == "":
				last = fmt.Errorf("replica at %s knows no leader", a)
			default:
				if lg, err := e.askGroup(ctx, gr.LeaderAddr); err == nil && lg.Role == "Leader" {
					return lg, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("find the leader among %v: %w (last: %v)", addrs, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// HostList asks the process serving addr which replicas it hosts.
func (e Env) HostList(ctx context.Context, addr string) (*pb.HostListReply, error) {
	var l pb.HostListReply
	if err := e.Call(ctx, []string{addr}, pb.Method_HOST_LIST, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// hostStop stops replica id of v at the process whose own partition is
// served at home; one already gone is no error.
func (e Env) hostStop(ctx context.Context, home string, v uint16, id uint64) error {
	err := e.Call(ctx, []string{home}, pb.Method_HOST_STOP, &pb.HostStopRequest{Partition: uint32(v), Id: id}, nil)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("stop replica %d of virtual partition %d at %s: %w", id, v, home, err)
	}
	return nil
}

// JoinReplica starts replica id of virtual partition v in the process
// serving host, as one that joins the group of members, and has the
// group's leader add it: a learner until it has applied what the group
// had committed, then a voter.
func (e Env) JoinReplica(ctx context.Context, host string, v uint16, id uint64, members []*pb.HostReplica) (*pb.HostReplica, error) {
	req := &pb.HostStartRequest{Partition: uint32(v), Id: id, Join: true}
	addrs := make([]string, 0, len(members))
	for _, m := range members {
		if m.Id == id {
			continue // a learner a stopped move left: it is added again
		}
		req.Others = append(req.Others, &pb.HostPeer{Id: m.Id, Addr: m.Addr, RaftAddr: m.RaftAddr})
		addrs = append(addrs, m.Addr)
	}
	var r pb.HostReplica
	if err := e.Call(ctx, []string{host}, pb.Method_HOST_START, req, &r); err != nil {
		return nil, fmt.Errorf("start replica %d of virtual partition %d at %s: %w", id, v, host, err)
	}
	wait := max(time.Until(deadlineOf(ctx))-time.Second, time.Second)
	// A learner first, until it has applied what the group had committed
	// (its log holding it is not enough: a replica that votes while it
	// still restores a large snapshot answers no heartbeat, and the
	// leader steps down), then a voter.
	add := &pb.GroupAddRequest{Id: id, Addr: r.Addr, RaftAddr: r.RaftAddr, WaitMs: uint32(wait / time.Millisecond), Learner: true}
	var gr pb.GroupReply
	if err := e.Call(ctx, addrs, pb.Method_GROUP_ADD, add, &gr); err != nil {
		return nil, fmt.Errorf("add replica %d of virtual partition %d: %w", id, v, err)
	}
	if err := e.waitApplied(ctx, r.Addr, gr.Commit); err != nil {
		return nil, fmt.Errorf("replica %d of virtual partition %d: %w", id, v, err)
	}
	add.Learner = false
	if err := e.Call(ctx, addrs, pb.Method_GROUP_ADD, add, &gr); err != nil {
		return nil, fmt.Errorf("promote replica %d of virtual partition %d: %w", id, v, err)
	}
	return &r, nil
}

// waitApplied waits until the replica at addr has applied index.
func (e Env) waitApplied(ctx context.Context, addr string, index uint64) error {
	for {
		gr, err := e.askGroup(ctx, addr)
		if err == nil && gr.Applied >= index {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply up to %d at %s: %w (%v)", index, addr, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// deadlineOf returns ctx's deadline, or a minute from now.
func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// Dialer returns a Call that dials the servers at addrs for each call
// with cfg (its secret, token, TLS and timeouts), as the superuser.
func Dialer(cfg rpc.ClientConfig) func(ctx context.Context, addrs []string, m pb.Method, req, reply proto.Message) error {
	return func(ctx context.Context, addrs []string, m pb.Method, req, reply proto.Message) error {
		c, err := rpc.DialAny(addrs, cfg)
		if err != nil {
			return fmt.Errorf("%s at %v: %w", m, addrs, err)
		}
		defer c.Close()
		var data []byte
		if req != nil {
			data, _ = proto.Marshal(req)
		}
		st, rep, err := c.Call(ctx, uint16(m), rpc.Cred{}, data)
		if err != nil {
			return fmt.Errorf("%s at %v: %w", m, addrs, err)
		}
		if st != 0 {
			var d pb.ErrorDetail
			if proto.Unmarshal(rep, &d) == nil && d.Message != "" {
				return fmt.Errorf("%s: %w", d.Message, syscall.Errno(st))
			}
			return fmt.Errorf("%s at %v: %w", m, addrs, syscall.Errno(st))
		}
		if reply != nil {
			if err := proto.Unmarshal(rep, reply); err != nil {
				return fmt.Errorf("%s at %v: reply: %w", m, addrs, err)
			}
		}
		return nil
	}
}
