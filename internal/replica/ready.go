package replica

// The Ready loop's body, with Raft's asynchronous storage writes: a
// Ready's messages to other replicas go out at once, its MsgStorageAppend
// is written to the log and handed to the syncer (syncer.go), whose fsync
// runs while this goroutine goes on, and its MsgStorageApply is applied
// here. All on the raft goroutine.

import (
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/wal"
)

func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	if rd.SoftState != nil {
		n.softState(*rd.SoftState)
	}
	for _, rs := range rd.ReadStates {
		n.readConfirmed(rs)
	}
	// Raft puts in Messages only what may leave before this replica's
	// writes are durable (a leader's MsgApps and heartbeats, vote
	// requests); what acknowledges entries or grants votes comes back as
	// responses of the MsgStorageAppend, delivered by the syncer after the
	// fsync. So the followers write their disks while the leader writes
	// its own.
	var local []pb.Message
	k := 0
	for _, m := range rd.Messages {
		if m.To == raft.LocalAppendThread || m.To == raft.LocalApplyThread || m.To == n.id {
			local = append(local, m)
			continue
		}
		rd.Messages[k] = m
		k++
	}
	n.send(rd.Messages[:k])
	for _, m := range local {
		var err error
		switch m.To {
		case raft.LocalAppendThread:
			err = n.storageAppend(m)
		case raft.LocalApplyThread:
			err = n.storageApply(m)
		default:
			n.step(m)
		}
		if err != nil {
			return err
		}
	}
	return n.maybeSnapshot()
}

// storageAppend writes a MsgStorageAppend: the hard state, a snapshot to
// install, the entries; then hands the point written and the message's
// responses to the syncer.
func (n *Node) storageAppend(m pb.Message) error {
	hs := pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
	if !raft.IsEmptyHardState(hs) {
		if hs.Term != n.saved.Term || hs.Vote != n.saved.Vote {
			// Before the entries, so that no entry's term is above the
			// stored term, and with fsyncs of its own (rare: at
			// elections). The commit stored must not pass the entries
			// already durable.
			if err := n.saveState(hs.Term, hs.Vote, min(hs.Commit, n.durable())); err != nil {
				return err
			}
			n.m.term.Set(float64(hs.Term))
		}
		n.st.hs = hs
	}
	if m.Snapshot != nil && !raft.IsEmptySnap(*m.Snapshot) {
		// The install resets the log: nothing may be syncing under it.
		if err := n.drainSyncs(); err != nil {
			return err
		}
		if err := n.install(*m.Snapshot); err != nil {
			return err
		}
	}
	if len(m.Entries) > 0 {
		if m.Entries[0].Index <= n.st.last {
			// Entries replaced by a new leader's: the log is cut under
			// them, which must not race a sync of what is cut.
			if err := n.drainSyncs(); err != nil {
				return err
			}
		}
		if err := n.st.append(m.Entries); err != nil {
			return fmt.Errorf("append entries: %w", err)
		}
	}
	point, err := n.wlog.Flush()
	if err != nil {
		return fmt.Errorf("write entries: %w", err)
	}
	if point.NewSegment() {
		// A segment was started: the owner's Sync syncs the directory once
		// (the syncer's SyncFlushed would sync it at every point until
		// then). Once per segment.
		if err := n.wlog.Sync(); err != nil {
			return fmt.Errorf("sync entries: %w", err)
		}
	}
	n.inflight++
	if len(m.Entries) > 0 {
		n.appending++
	}
	n.syncer.add(syncJob{point: point, resps: m.Responses, entries: len(m.Entries), written: time.Now()})
	return nil
}

// storageApply applies a MsgStorageApply's committed entries (durable
// here and on a quorum) and steps its response.
func (n *Node) storageApply(m pb.Message) error {
	if err := n.apply(m.Entries); err != nil {
		return err
	}
	for _, r := range m.Responses {
		n.step(r)
	}
	return nil
}

// synced takes a report of the syncer: it steps the responses addressed
// to this replica, in order.
func (n *Node) synced(d syncDone) error {
	n.inflight -= d.jobs
	n.appending -= d.appended
	if d.err != nil {
		return fmt.Errorf("sync entries: %w", d.err)
	}
	for _, m := range d.local {
		n.step(m)
	}
	return nil
}

// drainSyncs waits until every job handed to the syncer is done.
func (n *Node) drainSyncs() error {
	for n.inflight > 0 {
		if err := n.synced(<-n.syncer.done); err != nil {
			return err
		}
	}
	return nil
}

// durable is the last entry known durable in this replica's log.
func (n *Node) durable() uint64 { return n.wlog.SyncedLSN() }

// saveState writes the state file.
func (n *Node) saveState(term, vote, commit uint64) error {
	st := wal.State{Term: term, Vote: vote, Commit: max(commit, n.saved.Commit)}
	if err := wal.WriteState(n.cfg.FS, n.cfg.Dir, st); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	n.saved = st
	return nil
}

// send passes the messages to the transport, except snapshots, which are
// streamed from the snapshot file on a goroutine of their own.
func (n *Node) send(msgs []pb.Message) {
	k := 0
	for _, m := range msgs {
		if m.Type == pb.MsgSnap {
			n.startStream(m)
			continue
		}
		msgs[k] = m
		k++
	}
	if k > 0 {
		n.cfg.Transport.Send(msgs[:k])
	}
}
