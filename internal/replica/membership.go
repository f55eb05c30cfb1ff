package replica

import pb "go.etcd.io/raft/v3/raftpb"

// MembershipObserver is implemented by a StateMachine that keeps more of
// its group's members than Raft does (their addresses, say). The Node
// calls ApplyMembership on its raft goroutine, in log order with Apply,
// for every membership change it applies: the replicas the change adds or
// promotes, those it removes, and the info its proposer gave
// (AddLearnerWith; nil otherwise). Every replica that applies the entry
// sees the same arguments, so what the observer keeps can be part of its
// snapshots.
type MembershipObserver interface {
	ApplyMembership(index uint64, added, removed []uint64, info []byte)
}

// observeConf tells the state machine, if it observes membership, of the
// change cc applied at index.
func (n *Node) observeConf(index uint64, cc pb.ConfChangeV2) {
	o, ok := n.cfg.StateMachine.(MembershipObserver)
	if !ok {
		return
	}
	var added, removed []uint64
	for _, c := range cc.Changes {
		switch c.Type {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode:
			added = append(added, c.NodeID)
		case pb.ConfChangeRemoveNode:
			removed = append(removed, c.NodeID)
		}
	}
	var info []byte
	if len(cc.Context) > 16 {
		info = cc.Context[16:]
	}
	o.ApplyMembership(index, added, removed, info)
}
