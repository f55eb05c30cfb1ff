package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"

	"google.golang.org/protobuf/proto"
)

// What a replicated partition tells of its group, and the checks that
// compare replicas.

// Group returns this replica's view of its group (GROUP_STATUS); any
// goroutine may call it. A server without peers answers as a group of
// one with role "single".
func (s *Server) Group(ctx context.Context) (*pb.GroupReply, error) {
	r := s.repl
	if r == nil {
		lsn := s.stats.lsn.Load()
		return &pb.GroupReply{Partition: uint32(s.cfg.Partition), Id: 1, Leader: 1, Role: "single",
			Commit: lsn, Applied: lsn, Last: lsn, Members: []*pb.GroupMember{{Id: 1}}}, nil
	}
	st, err := r.node.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("replica status: %w", err)
	}
	g := &pb.GroupReply{
		Partition: uint32(s.cfg.Partition), Id: st.ID, Addr: r.peer(st.ID).Addr, Leader: st.Leader,
		LeaderAddr: r.peer(st.Leader).Addr, Role: strings.TrimPrefix(st.Role, "State"), Term: st.Term,
		Commit: st.Commit, Applied: st.Applied, Last: st.Last, Snapshot: st.SnapshotIndex,
	}
	add := func(id uint64, learner bool) {
		m := &pb.GroupMember{Id: id, Addr: r.peer(id).Addr, RaftAddr: r.peer(id).RaftAddr, Learner: learner}
		if f, ok := st.Followers[id]; ok {
			m.Match, m.Lag, m.State, m.Active = f.Match, f.Lag, strings.ToLower(strings.TrimPrefix(f.State, "State")), f.Active
		} else if id == st.ID && st.Followers != nil {
			m.Match, m.State, m.Active = st.Last, "leader", true
		}
		g.Members = append(g.Members, m)
	}
	for _, id := range st.Voters {
		add(id, false)
	}
	for _, id := range st.Learners {
		add(id, true)
	}
	slices.SortFunc(g.Members, func(a, b *pb.GroupMember) int { return cmp.Compare(a.Id, b.Id) })
	return g, nil
}

// groupReply answers GROUP_STATUS, on an RPC reader: Group, and with
// verify the state's index, checksum and invariant check.
func (s *Server) groupReply(data []byte) *pb.GroupReply {
	var req pb.GroupRequest
	_ = proto.Unmarshal(data, &req) // an empty or older request asks for no verify
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	g, err := s.Group(ctx)
	if err != nil {
		return &pb.GroupReply{Partition: uint32(s.cfg.Partition), Role: "unknown"}
	}
	if req.Verify {
		if s.repl == nil {
			g.CheckError = "verify: the partition is not replicated (see canopy checkpoint)"
		} else {
			idx, sum, err := s.repl.verify()
			g.StateIndex, g.StateSha256 = idx, sum[:]
			if err != nil {
				g.CheckError = err.Error()
			}
		}
	}
	return g
}

// verify checks the namespace's invariants and checksums the state's
// checkpoint body, holding the state for the time it takes.
func (r *replicated) verify() (uint64, [sha256.Size]byte, error) {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	sm := r.state.sm
	h := sha256.New()
	body, err := sm.encodeState()
	if err != nil {
		return 0, [sha256.Size]byte{}, fmt.Errorf("encode state: %w", err)
	}
	for _, part := range body {
		h.Write(part)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if err := sm.eng.Check(); err != nil {
		return sm.nextLSN - 1, sum, fmt.Errorf("check: %w", err)
	}
	return sm.nextLSN - 1, sum, nil
}

// checkpointOf returns the checkpoint body of the replica's state now and
// the index it is at, for tests comparing replicas.
func (r *replicated) checkpointOf() (uint64, []byte, error) {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	body, err := r.state.sm.encodeState()
	if err != nil {
		return 0, nil, err
	}
	return r.state.sm.nextLSN - 1, bytes.Join(body, nil), nil
}
