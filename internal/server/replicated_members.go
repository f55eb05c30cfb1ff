package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/replica"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Membership changes of a replicated partition (GROUP_ADD, GROUP_REMOVE).
//
// A replica is added by the leader as a learner (Raft's
// ConfChangeAddLearnerNode), which receives the log, or a snapshot when the
// log no longer reaches back far enough, without voting; once its match
// index has reached the leader's commit index as it was when it was added,
// it is promoted to a voter. The new replica's addresses travel in the
// membership change's context (replica.Node.AddLearnerWith), so that every
// replica applies them with the change (ApplyMembership) and keeps them in
// its state (replicatedState.members), which goes into its snapshots: a
// replica that catches up from a snapshot knows every member added before
// it. The replica itself is started first, empty, with --join (Config.
// RaftJoin), so that it waits to be added instead of bootstrapping a group
// of its own.
//
// Addresses Config.Peers gives win over the replicated ones for the same
// id, since they are this replica's own view (the fault test puts a proxy
// on every link, a different address on each replica).

// peerView is the replicas' addresses by id as this replica knows them: an
// immutable map, replaced whole. The RPC readers read it; the raft
// goroutine replaces it.
type peerView struct {
	p atomic.Pointer[map[uint64]Peer]
}

func (v *peerView) set(m map[uint64]Peer) { v.p.Store(&m) }

// peer returns replica id's addresses (zero if unknown).
func (r *replicated) peer(id uint64) Peer { return (*r.peers.p.Load())[id] }

// peerOK returns replica id's addresses and whether it is known.
func (r *replicated) peerOK(id uint64) (Peer, bool) {
	p, ok := (*r.peers.p.Load())[id]
	return p, ok
}

// membersChanged is the replicated members' hook, on the raft goroutine:
// it rebuilds the peer view (the local peers over the replicated members)
// and points the transport at every peer's Raft address.
func (r *replicated) membersChanged(members map[uint64]Peer) {
	view := maps.Clone(members)
	maps.Copy(view, r.local)
	r.peers.set(view)
	for id, p := range view {
		if id != r.cfg.ReplicaID && p.RaftAddr != "" {
			r.transport.SetPeer(id, p.RaftAddr)
		}
	}
}

// ApplyMembership keeps the addresses of the replicas added with info (a
// marshaled GroupAddRequest) and forgets those removed
// (replica.MembershipObserver). It runs on the raft goroutine.
func (rs *replicatedState) ApplyMembership(index uint64, added, removed []uint64, info []byte) {
	rs.mu.Lock()
	changed := false
	if len(info) > 0 {
		var req pb.GroupAddRequest
		if err := proto.Unmarshal(info, &req); err != nil || req.Id == 0 {
			rs.sm.log.Error("membership change carries no replica addresses; skipped on every replica", "index", index, "err", err)
		} else if slices.Contains(added, req.Id) {
			rs.members[req.Id] = Peer{ID: req.Id, Addr: req.Addr, RaftAddr: req.RaftAddr}
			changed = true
		}
	}
	for _, id := range removed {
		if _, ok := rs.members[id]; ok {
			delete(rs.members, id)
			changed = true
		}
	}
	members := maps.Clone(rs.members)
	rs.mu.Unlock()
	if changed && rs.onMembers != nil {
		rs.onMembers(members)
	}
}

// membersMagic starts a snapshot that lists replicated members before the
// state's index; a snapshot without it (no member was ever added) starts
// with the index, as before members were kept.
var membersMagic = []byte("CNPYRM01")

// writeMembers writes the members section of a snapshot: the magic, the
// count, and each member as a length-prefixed GroupAddRequest, by id.
// Nothing when there are none.
func writeMembers(w io.Writer, members map[uint64]Peer) error {
	if len(members) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.Write(membersMagic)
	b.Write(binary.AppendUvarint(nil, uint64(len(members))))
	for _, id := range slices.Sorted(maps.Keys(members)) {
		p := members[id]
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.GroupAddRequest{Id: p.ID, Addr: p.Addr, RaftAddr: p.RaftAddr})
		if err != nil {
			return fmt.Errorf("encode members: %w", err)
		}
		b.Write(binary.AppendUvarint(nil, uint64(len(data))))
		b.Write(data)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// readMembers reads the members section, if the snapshot has one.
func readMembers(br *bufio.Reader) (map[uint64]Peer, error) {
	members := map[uint64]Peer{}
	head, err := br.Peek(len(membersMagic))
	if err != nil || !bytes.Equal(head, membersMagic) {
		return members, nil // a short snapshot fails on its index
	}
	br.Discard(len(membersMagic))
	n, err := binary.ReadUvarint(br)
	if err != nil || n > 1<<16 {
		return nil, fmt.Errorf("members: count %d: %v", n, err)
	}
	for range n {
		size, err := binary.ReadUvarint(br)
		if err != nil || size > 1<<16 {
			return nil, fmt.Errorf("members: entry of %d bytes: %v", size, err)
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, fmt.Errorf("members: %w", err)
		}
		var req pb.GroupAddRequest
		if err := proto.Unmarshal(data, &req); err != nil || req.Id == 0 {
			return nil, fmt.Errorf("members: bad entry: %v", err)
		}
		members[req.Id] = Peer{ID: req.Id, Addr: req.Addr, RaftAddr: req.RaftAddr}
	}
	return members, nil
}

// groupCall answers the calls that change the group (GROUP_TRANSFER,
// GROUP_ADD, GROUP_REMOVE), each on a goroutine of its own: they wait for
// the group.
func (r *replicated) groupCall(c *rpc.Call) {
	switch pb.Method(c.Method) {
	case pb.Method_GROUP_ADD:
		r.add(c)
	case pb.Method_GROUP_REMOVE:
		r.remove(c)
	default:
		r.transfer(c)
	}
}

// defaultAddWait bounds a GROUP_ADD's wait for the new replica to catch up
// when the request names no bound.
const defaultAddWait = 10 * time.Minute

// add answers GROUP_ADD at the leader: the replica joins as a learner, is
// waited for until caught up, then promoted; the reply is the group.
func (r *replicated) add(c *rpc.Call) {
	var req pb.GroupAddRequest
	if err := proto.Unmarshal(c.Payload, &req); err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	if req.Id == 0 || req.Addr == "" {
		r.replyDetail(c, syscall.EINVAL, "group add: a replica id (not 0) and its address are needed")
		return
	}
	if req.RaftAddr == "" {
		ra, err := RaftAddrFor(req.Addr)
		if err != nil {
			r.replyDetail(c, syscall.EINVAL, "group add: "+err.Error())
			return
		}
		req.RaftAddr = ra
	}
	if !r.gate(c) {
		return
	}
	wait := defaultAddWait
	if req.WaitMs > 0 {
		wait = time.Duration(req.WaitMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := r.node.Status(ctx)
	if err != nil {
		r.replyErr(c, err)
		return
	}
	voter, learner := slices.Contains(st.Voters, req.Id), slices.Contains(st.Learners, req.Id)
	if p, ok := r.peerOK(req.Id); (voter || learner) && ok && p.Addr != req.Addr {
		r.replyDetail(c, syscall.EEXIST, fmt.Sprintf("group add: replica %d is a member at %s", req.Id, p.Addr))
		return
	}
	if !voter && !learner {
		info, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.GroupAddRequest{Id: req.Id, Addr: req.Addr, RaftAddr: req.RaftAddr})
		if err := r.node.AddLearnerWith(ctx, req.Id, info); err != nil {
			r.replyErr(c, err)
			return
		}
		r.cfg.Logger.Info("replica added as a learner", "replica", req.Id, "addr", req.Addr, "raft", req.RaftAddr)
	}
	if !voter {
		if err := r.catchUp(ctx, req.Id); err != nil {
			r.replyErr(c, err)
			return
		}
		if !req.Learner {
			if err := r.node.Promote(ctx, req.Id); err != nil {
				r.replyErr(c, err)
				return
			}
			r.cfg.Logger.Info("replica promoted to voter", "replica", req.Id)
		}
	}
	r.replyGroup(c, ctx)
}

// catchUp waits until learner id's match index reaches the leader's
// commit index as it is now, and the leader replicates to it by log.
func (r *replicated) catchUp(ctx context.Context, id uint64) error {
	st, err := r.node.Status(ctx)
	if err != nil {
		return err
	}
	target := st.Commit
	tick := max(r.cfg.RaftTick, 10*time.Millisecond)
	for {
		st, err := r.node.Status(ctx)
		if err != nil {
			return err
		}
		if st.Followers == nil {
			return &replica.NotLeaderError{Leader: st.Leader}
		}
		if f, ok := st.Followers[id]; ok && f.Match >= target && f.State == "StateReplicate" {
			return nil
		}
		select {
		case <-time.After(tick):
		case <-ctx.Done():
			return fmt.Errorf("replica %d has not caught up: %w", id, ctx.Err())
		}
	}
}

// remove answers GROUP_REMOVE at the leader. The leader asked to remove
// itself hands leadership over first and answers NOT_LEADER naming the
// new leader, where the call is retried.
func (r *replicated) remove(c *rpc.Call) {
	var req pb.GroupRemoveRequest
	if err := proto.Unmarshal(c.Payload, &req); err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	if !r.gate(c) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	st, err := r.node.Status(ctx)
	if err != nil {
		r.replyErr(c, err)
		return
	}
	if !slices.Contains(st.Voters, req.Id) && !slices.Contains(st.Learners, req.Id) {
		r.replyDetail(c, syscall.ENOENT, fmt.Sprintf("group remove: replica %d is not a member", req.Id))
		return
	}
	if req.Id == r.cfg.ReplicaID {
		to, best := uint64(0), uint64(0)
		for id, f := range st.Followers {
			if !f.Learner && (to == 0 || f.Match > best || f.Match == best && id < to) {
				to, best = id, f.Match
			}
		}
		if to == 0 {
			r.replyDetail(c, syscall.EBUSY, "group remove: the leader is the group's only voter")
			return
		}
		if err := r.node.TransferLeadership(ctx, to); err != nil {
			r.replyErr(c, err)
			return
		}
		c.Reply(rpc.StatusNotLeader, []byte(r.peer(to).Addr))
		return
	}
	if err := r.node.Remove(ctx, req.Id); err != nil {
		r.replyErr(c, err)
		return
	}
	r.cfg.Logger.Info("replica removed", "replica", req.Id)
	r.replyGroup(c, ctx)
}

// replyGroup answers c with this replica's view of the group.
func (r *replicated) replyGroup(c *rpc.Call, ctx context.Context) {
	g, err := r.groupView(ctx)
	if err != nil {
		r.replyErr(c, err)
		return
	}
	data, _ := proto.Marshal(g)
	c.Reply(0, data)
}

// replyDetail answers c with errno and an ErrorDetail saying why.
func (r *replicated) replyDetail(c *rpc.Call, errno syscall.Errno, detail string) {
	data, _ := proto.Marshal(&pb.ErrorDetail{Message: detail})
	c.Reply(uint32(errno), data)
}
